import type pg from 'pg';
import type { Migration } from './apply-migrations';
import { openPostgresPool } from './open-postgres-pool';
import type { SpentLedger } from './spent-ledger';

/** The ledger's table on PostgreSQL, registered as module `spent` like SQLite's. Append to change; never edit a shipped one. */
export const postgresSpentLedgerMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE spent_ids (
      id TEXT PRIMARY KEY,
      expires_at BIGINT NOT NULL
    );
    CREATE INDEX spent_ids_by_expiry ON spent_ids (expires_at);`,
  },
];

/**
 * The single-use ledger on a pool whose owner has applied {@link postgresSpentLedgerMigrations}.
 * A spend is one `INSERT … ON CONFLICT DO NOTHING`: the primary key decides, so among any number
 * of concurrent spends of one id through any number of instances exactly one inserts the row
 * and answers true. Ids past their expiry are swept first (they are refused by their own expiry
 * anyway). `close()` leaves the pool to its owner.
 */
export function createPostgresSpentLedger(pool: pg.Pool, now: () => number = Date.now): SpentLedger {
  return {
    async spend(id, expiresAt) {
      await pool.query('DELETE FROM spent_ids WHERE expires_at <= $1', [now()]);
      const inserted = await pool.query(
        'INSERT INTO spent_ids (id, expires_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING',
        [id, expiresAt],
      );
      return inserted.rowCount === 1;
    },
    async close() {
      // The pool is its owner's.
    },
  };
}

/** Opens the ledger on a PostgreSQL database (the CLI's `--store postgres://…`); `close()` ends its pool. */
export async function openPostgresSpentLedger(url: string, now: () => number = Date.now): Promise<SpentLedger> {
  const pool = await openPostgresPool({
    url,
    migrations: { spent: postgresSpentLedgerMigrations },
    what: 'spent ledger',
  });
  return { ...createPostgresSpentLedger(pool, now), close: () => pool.end() };
}
