import type pg from 'pg';
import type { Migration } from '../apply-migrations';
import type { CheckpointLeaseStore } from './checkpoint-lease';

/** The lease's one row on PostgreSQL, module `checkpoint-lease` like SQLite's. Append to change. */
export const postgresCheckpointLeaseMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE audit_checkpoint_lease (
      name TEXT PRIMARY KEY CHECK (name = 'signer'),
      owner TEXT NOT NULL CHECK (length(owner) > 0),
      expires_at BIGINT NOT NULL
    );`,
  },
];

/**
 * The checkpoint lease on a pool whose owner applied {@link postgresCheckpointLeaseMigrations}. A
 * claim is one `INSERT … ON CONFLICT DO UPDATE … WHERE`: at `READ COMMITTED` the conflicting row
 * is locked and the condition re-read on its newest version, so of concurrent claims through any
 * number of instances exactly one holds the lease.
 */
export function createPostgresCheckpointLeaseStore(pool: pg.Pool): CheckpointLeaseStore {
  return {
    async claim({ owner, now, ttlMs }) {
      const { rowCount } = await pool.query(
        `INSERT INTO audit_checkpoint_lease (name, owner, expires_at) VALUES ('signer', $1, $2)
         ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
           WHERE audit_checkpoint_lease.owner = excluded.owner OR audit_checkpoint_lease.expires_at <= $3
         RETURNING owner`,
        [owner, now + ttlMs, now],
      );
      return rowCount === 1;
    },
    async release(owner) {
      await pool.query(`DELETE FROM audit_checkpoint_lease WHERE name = 'signer' AND owner = $1`, [owner]);
    },
    async holder() {
      const { rows } = await pool.query<{ owner: string; expires_at: string }>(
        `SELECT owner, expires_at FROM audit_checkpoint_lease WHERE name = 'signer'`,
      );
      const row = rows[0];
      return row === undefined ? undefined : { owner: row.owner, expiresAt: Number(row.expires_at) };
    },
  };
}
