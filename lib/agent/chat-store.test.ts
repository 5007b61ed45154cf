import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { applyMigrations } from '../apply-migrations';
import { type ChatStore, chatMigrations, createMemoryChatStore, createSqliteChatStore } from './chat-store';

const folders: string[] = [];
const databases: Database.Database[] = [];
afterEach(async () => {
  for (const database of databases.splice(0)) database.close();
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

async function sqliteFile(): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), 'chat-store-'));
  folders.push(folder);
  return join(folder, 'household.sqlite');
}

function openSqlite(path: string): ChatStore {
  const database = new Database(path);
  databases.push(database);
  applyMigrations(database, { chat: chatMigrations });
  return createSqliteChatStore(database);
}

// One contract for both stores (STYLE: interchangeable implementations share one suite).
describe.each([
  ['sqlite', async () => openSqlite(await sqliteFile())],
  ['memory', async () => createMemoryChatStore()],
] as const)('the %s chat store', (_name, open) => {
  it('numbers events 1, 2, 3… per session, independently of other sessions', async () => {
    const store = await open();
    await store.createSession('a', '2030-01-01T00:00:00.000Z');
    await store.createSession('b', '2030-01-01T00:00:00.000Z');
    const at = '2030-01-01T00:00:01.000Z';
    const first = await store.append('a', { type: 'user-message', text: 'menu' }, at);
    await store.append('b', { type: 'turn-started' }, at);
    const second = await store.append('a', { type: 'turn-ended', reason: 'done' }, at);
    expect([first.id, second.id]).toEqual([1, 2]);
    expect(first).toEqual({ id: 1, at, type: 'user-message', text: 'menu' });
    expect((await store.after('a', 0)).map((event) => event.id)).toEqual([1, 2]);
    expect(await store.after('a', 1)).toEqual([second]);
    expect((await store.after('b', 0)).map((event) => event.type)).toEqual(['turn-started']);
  });

  it('knows its sessions and refuses an append to an unknown one', async () => {
    const store = await open();
    await store.createSession('a', '2030-01-01T00:00:00.000Z');
    expect(await store.hasSession('a')).toBe(true);
    expect(await store.hasSession('forged')).toBe(false);
    await expect(store.append('forged', { type: 'turn-started' }, '2030-01-01T00:00:00.000Z')).rejects.toThrow(
      /unknown chat session/,
    );
    expect(await store.after('forged', 0)).toEqual([]);
  });

  it('opens a session by the hash of its secret only, one secret per session and one session per secret', async () => {
    const store = await open();
    await store.createSession('a', '2030-01-01T00:00:00.000Z');
    await store.createSession('b', '2030-01-01T00:00:00.000Z');
    await store.bindSecret('a', 'hash-a');
    expect(await store.sessionOfSecret('hash-a')).toBe('a');
    expect(await store.sessionOfSecret('a')).toBeUndefined();
    expect(await store.sessionOfSecret('hash-b')).toBeUndefined();
    // Neither a second secret for a nor a's secret for b.
    await expect(store.bindSecret('a', 'hash-a2')).rejects.toThrow();
    await expect(store.bindSecret('b', 'hash-a')).rejects.toThrow();
    expect(await store.sessionOfSecret('hash-a')).toBe('a');
  });
});

describe('the SQLite chat store', () => {
  it('keeps sessions and events across a reopen, and continues their ids', async () => {
    const path = await sqliteFile();
    const before = openSqlite(path);
    await before.createSession('a', '2030-01-01T00:00:00.000Z');
    await before.append('a', { type: 'user-message', text: 'a cheese slice' }, '2030-01-01T00:00:01.000Z');
    databases.pop()?.close();
    const after = openSqlite(path);
    expect(await after.hasSession('a')).toBe(true);
    expect(await after.after('a', 0)).toEqual([
      { id: 1, at: '2030-01-01T00:00:01.000Z', type: 'user-message', text: 'a cheese slice' },
    ]);
    expect((await after.append('a', { type: 'turn-started' }, '2030-01-01T00:00:02.000Z')).id).toBe(2);
  });
});
