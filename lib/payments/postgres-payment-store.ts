import type pg from 'pg';
import type { Migration } from '../apply-migrations';
import { type PaymentStore, paymentRecordFromRow } from './payment-store';

/**
 * The payments table on PostgreSQL (SPEC §7, §11), registered as module `payments` like SQLite's,
 * with the same columns and SQLite's checks, plus one: a succeeded payment carries its reference
 * and receipt, so no instance can see one paid without the receipt. Times are milliseconds since
 * the epoch. Append to
 * change; never edit a shipped one.
 */
export const postgresPaymentsMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE payments (
      invoice_id TEXT PRIMARY KEY,
      approval_id TEXT NOT NULL,
      merchant_id TEXT NOT NULL,
      amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
      currency TEXT NOT NULL CHECK (currency = 'usd'),
      state TEXT NOT NULL CHECK (state IN ('charging', 'succeeded', 'declined')),
      attempt INTEGER NOT NULL DEFAULT 1 CHECK (attempt >= 1),
      payment_ref TEXT,
      receipt TEXT,
      reason TEXT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      CHECK ((state = 'succeeded') = (payment_ref IS NOT NULL AND receipt IS NOT NULL))
    );
    CREATE INDEX payments_charging ON payments (created_at, invoice_id) WHERE state = 'charging';`,
  },
];

// BIGINT columns arrive as strings from node-postgres; the rows read as numbers.
const columns = `invoice_id, approval_id, merchant_id, amount_cents, currency, state, attempt, payment_ref, receipt,
  reason, created_at::float8 AS created_at, updated_at::float8 AS updated_at`;

/**
 * The payment store on a pool whose owner has applied {@link postgresPaymentsMigrations}. One
 * payment per invoice across every instance: `begin` is one `INSERT … ON CONFLICT DO NOTHING` on
 * the invoice's primary key, and every transition is one conditional `UPDATE` on the row, so of
 * two instances settling one invoice exactly one moves it (the receipt is written by the same
 * statement that marks it succeeded).
 */
export function createPostgresPaymentStore(pool: pg.Pool): PaymentStore {
  const read = async (invoiceId: string) => {
    const rows = await pool.query(`SELECT ${columns} FROM payments WHERE invoice_id = $1`, [invoiceId]);
    return rows.rows[0] === undefined ? undefined : paymentRecordFromRow(rows.rows[0]);
  };
  const moved = async (sql: string, values: readonly unknown[]) => (await pool.query(sql, [...values])).rowCount === 1;
  return {
    async begin(record) {
      const inserted = await pool.query(
        `INSERT INTO payments (invoice_id, approval_id, merchant_id, amount_cents, currency, state, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, 'charging', $6, $6) ON CONFLICT (invoice_id) DO NOTHING`,
        [record.invoiceId, record.approvalId, record.merchantId, record.amountCents, record.currency, record.createdAt],
      );
      // The row exists now, whoever inserted it: a later statement sees what the winner committed.
      const stored = await read(record.invoiceId);
      if (!stored) throw new Error(`payment ${record.invoiceId} vanished`);
      return { record: stored, created: inserted.rowCount === 1 };
    },
    get: read,
    async listCharging() {
      const rows = await pool.query(
        `SELECT ${columns} FROM payments WHERE state = 'charging' ORDER BY created_at, invoice_id COLLATE "C"`,
      );
      return rows.rows.map(paymentRecordFromRow);
    },
    succeed: (invoiceId, result) =>
      moved(
        `UPDATE payments SET state = 'succeeded', payment_ref = $2, receipt = $3, reason = NULL, updated_at = $4
         WHERE invoice_id = $1 AND state = 'charging'`,
        [invoiceId, result.paymentRef, result.receipt, result.now],
      ),
    decline: (invoiceId, result) =>
      moved(
        `UPDATE payments SET state = 'declined', reason = $2, updated_at = $3 WHERE invoice_id = $1 AND state = 'charging'`,
        [invoiceId, result.reason, result.now],
      ),
    retry: (invoiceId, now) =>
      moved(
        `UPDATE payments SET state = 'charging', attempt = attempt + 1, reason = NULL, updated_at = $2
         WHERE invoice_id = $1 AND state = 'declined'`,
        [invoiceId, now],
      ),
  };
}
