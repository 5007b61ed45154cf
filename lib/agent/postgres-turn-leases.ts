import type pg from 'pg';
import type { Migration } from '../apply-migrations';
import { leaseOfRow, type TurnLeaseStore } from './turn-leases';

/** The lease table on PostgreSQL, module `turn-leases` like SQLite's. Append to change. */
export const postgresTurnLeaseMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE turn_leases (
      session_id TEXT PRIMARY KEY,
      owner TEXT NOT NULL CHECK (length(owner) > 0),
      expires_at BIGINT NOT NULL,
      resume TEXT
    );
    CREATE INDEX turn_leases_orphans ON turn_leases (expires_at) WHERE resume IS NOT NULL;`,
  },
];

/**
 * The turn leases on a pool whose owner applied {@link postgresTurnLeaseMigrations}. A claim is one
 * `INSERT … ON CONFLICT DO UPDATE … WHERE`: at `READ COMMITTED` the conflicting row is locked and
 * the condition re-read on its newest version, so of concurrent claims of an expired lease through
 * any number of instances exactly one gets a row back.
 */
export function createPostgresTurnLeaseStore(pool: pg.Pool): TurnLeaseStore {
  return {
    async claim({ sessionId, owner, now, ttlMs }) {
      const { rows } = await pool.query(
        `INSERT INTO turn_leases (session_id, owner, expires_at) VALUES ($1, $2, $3)
         ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
           WHERE turn_leases.owner = excluded.owner OR turn_leases.expires_at <= $4
         RETURNING session_id, owner, expires_at, resume`,
        [sessionId, owner, now + ttlMs, now],
      );
      return rows[0] === undefined ? undefined : leaseOfRow(rows[0]);
    },
    async renew({ sessionId, owner, now, ttlMs }) {
      const result = await pool.query('UPDATE turn_leases SET expires_at = $3 WHERE session_id = $1 AND owner = $2', [
        sessionId,
        owner,
        now + ttlMs,
      ]);
      return result.rowCount === 1;
    },
    async mark({ sessionId, owner, resume }) {
      const result = await pool.query('UPDATE turn_leases SET resume = $3 WHERE session_id = $1 AND owner = $2', [
        sessionId,
        owner,
        resume === null ? null : JSON.stringify(resume),
      ]);
      return result.rowCount === 1;
    },
    async release(sessionId, owner) {
      await pool.query('DELETE FROM turn_leases WHERE session_id = $1 AND owner = $2', [sessionId, owner]);
    },
    async orphans(now, limit) {
      const { rows } = await pool.query(
        `SELECT session_id, owner, expires_at, resume FROM turn_leases
         WHERE resume IS NOT NULL AND expires_at <= $1 ORDER BY expires_at LIMIT $2`,
        [now, limit],
      );
      return rows.map(leaseOfRow);
    },
  };
}
