import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { applyMigrations } from './apply-migrations';
import { callApprovalMigrations } from './call-approval-migrations';

const databases: Database.Database[] = [];
afterEach(() => {
  for (const database of databases.splice(0)) database.close();
});

function insert(database: Database.Database, requestId: string, callHash: string, status: string, createdAt: number) {
  database
    .prepare(
      `INSERT INTO call_approvals (request_id, tool, call, call_hash, required_roles, approvals, status, created_at,
         expires_at, updated_at) VALUES (?, 'pizza__cancel_order', '{}', ?, '["child"]', '{}', ?, ?, ?, ?)`,
    )
    .run(requestId, callHash, status, createdAt, createdAt + 600_000, createdAt);
}

describe('call-approval migrations', () => {
  it('version 2 keeps the newest open request of a call hash open, closes the older ones, then keeps one open', () => {
    const database = new Database(':memory:');
    databases.push(database);
    applyMigrations(database, { 'call-approvals': callApprovalMigrations.slice(0, 1) });
    // Written by version 1, which let two checks of one call open two requests.
    insert(database, 'older', 'hash-a', 'pending', 1);
    insert(database, 'newer', 'hash-a', 'approved', 2);
    insert(database, 'closed', 'hash-a', 'declined', 3);
    insert(database, 'alone', 'hash-b', 'pending', 1);
    applyMigrations(database, { 'call-approvals': callApprovalMigrations });
    const statuses = database.prepare('SELECT request_id, status, reason FROM call_approvals ORDER BY rowid').all();
    expect(statuses).toStrictEqual([
      { request_id: 'older', status: 'expired', reason: 'replaced by a newer request for the same call' },
      { request_id: 'newer', status: 'approved', reason: null },
      { request_id: 'closed', status: 'declined', reason: null },
      { request_id: 'alone', status: 'pending', reason: null },
    ]);
    expect(() => insert(database, 'another', 'hash-b', 'pending', 4)).toThrow(/UNIQUE constraint failed/);
    insert(database, 'after-close', 'hash-c', 'used', 4);
    insert(database, 'after-close-2', 'hash-c', 'pending', 5);
  });
});
