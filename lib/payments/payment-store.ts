import type Database from 'better-sqlite3';
import { z } from 'zod';
import type { Migration } from '../apply-migrations';

/** Where one invoice's payment is. `charging` is in doubt until the rail's answer is recorded. */
export type PaymentState = 'charging' | 'succeeded' | 'declined';

/** The household's record of paying one invoice (one row per invoice `jti`). */
export interface PaymentRecord {
  readonly invoiceId: string;
  readonly approvalId: string;
  readonly merchantId: string;
  readonly amountCents: number;
  readonly currency: 'usd';
  readonly state: PaymentState;
  /** Which attempt this is: a declined charge is retried as the next attempt, with its own idempotency key. */
  readonly attempt: number;
  readonly paymentRef?: string;
  /** The `PaymentReceipt` JWT-VC once succeeded. */
  readonly receipt?: string;
  /** Why the rail declined, in words. */
  readonly reason?: string;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** Payments, behind an interface so a shared database can replace the SQLite file (SPEC §11). */
export interface PaymentStore {
  /** Inserts a `charging` row, or returns the existing one (`created: false`). */
  begin(
    record: Omit<PaymentRecord, 'state' | 'attempt' | 'updatedAt'>,
  ): Promise<{ record: PaymentRecord; created: boolean }>;
  get(invoiceId: string): Promise<PaymentRecord | undefined>;
  /** Payments whose outcome is not recorded yet (in doubt), oldest first. */
  listCharging(): Promise<readonly PaymentRecord[]>;
  /** `charging` → `succeeded` with the reference and receipt; `false` if it was not charging. */
  succeed(invoiceId: string, result: { paymentRef: string; receipt: string; now: number }): Promise<boolean>;
  /** `charging` → `declined`; `false` if it was not charging. */
  decline(invoiceId: string, result: { reason: string; now: number }): Promise<boolean>;
  /** `declined` → `charging` as the next attempt; `false` if it was not declined. */
  retry(invoiceId: string, now: number): Promise<boolean>;
}

/** The payments module's tables (registered in `lib/store.ts`). */
export const paymentsMigrations: readonly Migration[] = [
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
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    ) STRICT`,
  },
];

const Row = z.object({
  invoice_id: z.string(),
  approval_id: z.string(),
  merchant_id: z.string(),
  amount_cents: z.number().int(),
  currency: z.literal('usd'),
  state: z.enum(['charging', 'succeeded', 'declined']),
  attempt: z.number().int().min(1),
  payment_ref: z.string().nullable(),
  receipt: z.string().nullable(),
  reason: z.string().nullable(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});

/** The payment store on the household database (migrated by `lib/store.ts`). Every transition is one CAS statement. */
export function createSqlitePaymentStore(database: Database.Database): PaymentStore {
  const insert = database.prepare(
    `INSERT INTO payments (invoice_id, approval_id, merchant_id, amount_cents, currency, state, created_at, updated_at)
     VALUES (@invoiceId, @approvalId, @merchantId, @amountCents, @currency, 'charging', @createdAt, @createdAt)
     ON CONFLICT (invoice_id) DO NOTHING`,
  );
  const select = database.prepare<[string]>('SELECT * FROM payments WHERE invoice_id = ?');
  const charging = database.prepare(`SELECT * FROM payments WHERE state = 'charging' ORDER BY created_at, invoice_id`);
  const succeed = database.prepare(
    `UPDATE payments SET state = 'succeeded', payment_ref = @paymentRef, receipt = @receipt, reason = NULL, updated_at = @now
     WHERE invoice_id = @invoiceId AND state = 'charging'`,
  );
  const decline = database.prepare(
    `UPDATE payments SET state = 'declined', reason = @reason, updated_at = @now
     WHERE invoice_id = @invoiceId AND state = 'charging'`,
  );
  const retry = database.prepare(
    `UPDATE payments SET state = 'charging', attempt = attempt + 1, reason = NULL, updated_at = @now
     WHERE invoice_id = @invoiceId AND state = 'declined'`,
  );
  const read = (invoiceId: string) => {
    const row = select.get(invoiceId);
    return row === undefined ? undefined : paymentRecordFromRow(row);
  };
  const begin = database.transaction((record: Omit<PaymentRecord, 'state' | 'attempt' | 'updatedAt'>) => {
    const created = insert.run(record).changes === 1;
    const stored = read(record.invoiceId);
    if (!stored) throw new Error(`payment ${record.invoiceId} vanished`);
    return { record: stored, created };
  });
  return {
    begin: async (record) => begin.immediate(record),
    get: async (invoiceId) => read(invoiceId),
    listCharging: async () => charging.all().map(paymentRecordFromRow),
    succeed: async (invoiceId, result) => succeed.run({ invoiceId, ...result }).changes === 1,
    decline: async (invoiceId, result) => decline.run({ invoiceId, ...result }).changes === 1,
    retry: async (invoiceId, now) => retry.run({ invoiceId, now }).changes === 1,
  };
}

/** A `payments` row (SQLite's or PostgreSQL's, times as numbers) parsed into its record; a malformed row throws. */
export function paymentRecordFromRow(row: unknown): PaymentRecord {
  const parsed = Row.parse(row);
  return {
    invoiceId: parsed.invoice_id,
    approvalId: parsed.approval_id,
    merchantId: parsed.merchant_id,
    amountCents: parsed.amount_cents,
    currency: parsed.currency,
    state: parsed.state,
    attempt: parsed.attempt,
    ...(parsed.payment_ref === null ? {} : { paymentRef: parsed.payment_ref }),
    ...(parsed.receipt === null ? {} : { receipt: parsed.receipt }),
    ...(parsed.reason === null ? {} : { reason: parsed.reason }),
    createdAt: parsed.created_at,
    updatedAt: parsed.updated_at,
  };
}
