import type pg from 'pg';
import type { Migration } from '../apply-migrations';
import { type MockRailChargeRow, type MockRailStore, mockRailChargeFromRow, mockRailChargeToRow } from './mock-rail';

/**
 * The mock rail's ledger on PostgreSQL, registered as module `mock-rail` like SQLite's, with the
 * same columns and checks; times are milliseconds since the epoch. Append to change; never edit a
 * shipped one.
 */
export const postgresMockRailMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE mock_rail_charges (
      idempotency_key TEXT PRIMARY KEY,
      invoice_id TEXT NOT NULL,
      merchant_id TEXT NOT NULL,
      amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
      currency TEXT NOT NULL CHECK (currency = 'usd'),
      status TEXT NOT NULL CHECK (status IN ('succeeded', 'declined')),
      payment_ref TEXT,
      decline_code TEXT,
      decline_reason TEXT,
      created_at BIGINT NOT NULL,
      CHECK ((status = 'succeeded') = (payment_ref IS NOT NULL)),
      CHECK ((status = 'declined') = (decline_code IS NOT NULL AND decline_reason IS NOT NULL))
    );`,
  },
];

/**
 * The mock rail's ledger on a pool whose owner has applied {@link postgresMockRailMigrations}. The
 * insert is one `INSERT … ON CONFLICT DO NOTHING` on the idempotency key, so every instance on the
 * database records one charge per key, and the losers read the winner's outcome.
 */
export function createPostgresMockRailStore(pool: pg.Pool): MockRailStore {
  return {
    async find(idempotencyKey) {
      const rows = await pool.query<MockRailChargeRow>(
        `SELECT idempotency_key, invoice_id, merchant_id, amount_cents, currency, status, payment_ref, decline_code,
           decline_reason, created_at::float8 AS created_at FROM mock_rail_charges WHERE idempotency_key = $1`,
        [idempotencyKey],
      );
      const row = rows.rows[0];
      return row === undefined ? undefined : mockRailChargeFromRow(row);
    },
    async insert(record) {
      const row = mockRailChargeToRow(record);
      const inserted = await pool.query(
        `INSERT INTO mock_rail_charges (idempotency_key, invoice_id, merchant_id, amount_cents, currency, status,
           payment_ref, decline_code, decline_reason, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (idempotency_key) DO NOTHING`,
        [
          row.idempotency_key,
          row.invoice_id,
          row.merchant_id,
          row.amount_cents,
          row.currency,
          row.status,
          row.payment_ref,
          row.decline_code,
          row.decline_reason,
          row.created_at,
        ],
      );
      return inserted.rowCount === 1;
    },
  };
}
