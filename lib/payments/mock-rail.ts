import { createHash } from 'node:crypto';
import type Database from 'better-sqlite3';
import type { Migration } from '../apply-migrations';
import { PaymentError } from './payment-error';
import {
  type ChargeOptions,
  type ChargeOutcome,
  type ChargeRequest,
  describeDecline,
  type PaymentRail,
  parseChargeRequest,
} from './rail';

/** One charge the mock rail made (or declined), keyed by its idempotency key. */
export interface MockRailCharge {
  readonly idempotencyKey: string;
  readonly invoiceId: string;
  readonly merchantId: string;
  readonly amountCents: number;
  readonly currency: 'usd';
  readonly outcome: ChargeOutcome;
  /** Milliseconds since the epoch. */
  readonly createdAt: number;
}

/** Where the mock rail keeps its charges: durable (SQLite) in the household, in memory in tests. */
export interface MockRailStore {
  find(idempotencyKey: string): Promise<MockRailCharge | undefined>;
  /** Inserts unless a charge with the same key exists (atomically); true when this call inserted it. */
  insert(record: MockRailCharge): Promise<boolean>;
}

/** Options for {@link createMockRail}. */
export interface MockRailOptions {
  readonly store: MockRailStore;
  /** Makes declines testable: return a decline code (e.g. `insufficient_funds`) to decline a request. Default: never. */
  readonly declineWhen?: (request: ChargeRequest) => string | undefined;
  /** Test hooks. `afterCharge` runs after the charge is recorded and before returning, to simulate a crash or timeout after the money moved. */
  readonly faults?: { readonly afterCharge?: (request: ChargeRequest) => void | Promise<void> };
  /** Clock for `createdAt`; defaults to `Date.now`. */
  readonly now?: () => number;
}

/**
 * The default payment rail (SPEC §7): no network, deterministic payment reference
 * (`mock_` + the first 24 hex digits of SHA-256 of the key), idempotent per key exactly like
 * Stripe: the first outcome (success or decline) is recorded and every retry with the same key
 * returns it; the same key with another invoice, merchant, amount or currency throws
 * `PaymentError('idempotency-conflict')` rather than charge a different amount under a known key.
 */
export function createMockRail(options: MockRailOptions): PaymentRail {
  const now = options.now ?? Date.now;
  return {
    name: 'mock',
    async charge(input: ChargeRequest, callOptions?: ChargeOptions): Promise<ChargeOutcome> {
      // 1. Parse at the boundary: integer cents, one currency, nothing else.
      const request = parseChargeRequest(input);
      // 2. A caller that already gave up gets the unknown-outcome error, as with a real rail.
      if (callOptions?.signal?.aborted === true) {
        throw new PaymentError('rail-timeout', 'the charge was aborted before it completed: its outcome is unknown');
      }
      // 3. A known key returns its first outcome, provided it is the same charge.
      const known = await options.store.find(request.idempotencyKey);
      if (known !== undefined) return replay(known, request);
      // 4. Decide and record atomically; a concurrent call with the same key that won the insert wins.
      const code = options.declineWhen?.(request);
      const outcome: ChargeOutcome =
        code === undefined
          ? { status: 'succeeded', paymentRef: mockPaymentRef(request.idempotencyKey) }
          : { status: 'declined', code, reason: describeDecline(code) };
      const record: MockRailCharge = { ...request, outcome, createdAt: now() };
      if (!(await options.store.insert(record))) {
        const winner = await options.store.find(request.idempotencyKey);
        if (winner === undefined) {
          throw new PaymentError('rail-unavailable', 'the mock rail lost a charge record it was told exists');
        }
        return replay(winner, request);
      }
      // 5. The money has moved: a fault here leaves the caller with an unknown outcome, as a crash would.
      await options.faults?.afterCharge?.(request);
      return outcome;
    },
  };
}

/** The deterministic payment reference of a key: `mock_` + the first 24 hex digits of its SHA-256. */
export function mockPaymentRef(idempotencyKey: string): string {
  return `mock_${createHash('sha256').update(idempotencyKey, 'utf8').digest('hex').slice(0, 24)}`;
}

/** Returns a recorded outcome when the retry is the same charge; refuses a different one under the same key. */
function replay(known: MockRailCharge, request: ChargeRequest): ChargeOutcome {
  const differs: string[] = [];
  if (known.invoiceId !== request.invoiceId) differs.push('invoice');
  if (known.merchantId !== request.merchantId) differs.push('merchant');
  if (known.amountCents !== request.amountCents) differs.push('amount');
  if (known.currency !== request.currency) differs.push('currency');
  if (differs.length > 0) {
    throw new PaymentError(
      'idempotency-conflict',
      `this invoice was already charged with a different ${differs.join(', ')}: nothing new was charged`,
    );
  }
  return known.outcome;
}

/** An in-memory {@link MockRailStore}, for tests and throwaway runs. */
export function createMemoryMockRailStore(): MockRailStore {
  const charges = new Map<string, MockRailCharge>();
  return {
    async find(idempotencyKey) {
      return charges.get(idempotencyKey);
    },
    async insert(record) {
      if (charges.has(record.idempotencyKey)) return false;
      charges.set(record.idempotencyKey, record);
      return true;
    },
  };
}

/**
 * The mock rail's table in the household SQLite file, oldest first. Register under one module
 * name in `lib/store.ts`; append a version to change it, never edit a shipped one.
 */
export const mockRailMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE mock_rail_charges (
        idempotency_key TEXT PRIMARY KEY,
        invoice_id TEXT NOT NULL,
        merchant_id TEXT NOT NULL,
        amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
        currency TEXT NOT NULL CHECK (currency = 'usd'),
        status TEXT NOT NULL CHECK (status IN ('succeeded', 'declined')),
        payment_ref TEXT,
        decline_code TEXT,
        decline_reason TEXT,
        created_at INTEGER NOT NULL,
        CHECK ((status = 'succeeded') = (payment_ref IS NOT NULL)),
        CHECK ((status = 'declined') = (decline_code IS NOT NULL AND decline_reason IS NOT NULL))
      ) STRICT;
    `,
  },
];

/** A `mock_rail_charges` row as SQLite and PostgreSQL both store it. */
export interface MockRailChargeRow {
  idempotency_key: string;
  invoice_id: string;
  merchant_id: string;
  amount_cents: number;
  currency: string;
  status: string;
  payment_ref: string | null;
  decline_code: string | null;
  decline_reason: string | null;
  created_at: number;
}

/**
 * A {@link MockRailStore} on the household's SQLite handle (tables from {@link mockRailMigrations}).
 * The insert is one `INSERT … ON CONFLICT DO NOTHING`, so two processes sharing the file record
 * one charge per key.
 */
export function createSqliteMockRailStore(database: Database.Database): MockRailStore {
  const select = database.prepare<[string], MockRailChargeRow>(
    'SELECT * FROM mock_rail_charges WHERE idempotency_key = ?',
  );
  const insert = database.prepare<[MockRailChargeRow]>(
    `INSERT INTO mock_rail_charges (idempotency_key, invoice_id, merchant_id, amount_cents, currency, status,
       payment_ref, decline_code, decline_reason, created_at)
     VALUES (@idempotency_key, @invoice_id, @merchant_id, @amount_cents, @currency, @status,
       @payment_ref, @decline_code, @decline_reason, @created_at)
     ON CONFLICT (idempotency_key) DO NOTHING`,
  );
  return {
    async find(idempotencyKey) {
      const row = select.get(idempotencyKey);
      return row === undefined ? undefined : mockRailChargeFromRow(row);
    },
    async insert(record) {
      return insert.run(mockRailChargeToRow(record)).changes === 1;
    },
  };
}

/** A charge as its `mock_rail_charges` row. */
export function mockRailChargeToRow(record: MockRailCharge): MockRailChargeRow {
  const { outcome } = record;
  return {
    idempotency_key: record.idempotencyKey,
    invoice_id: record.invoiceId,
    merchant_id: record.merchantId,
    amount_cents: record.amountCents,
    currency: record.currency,
    status: outcome.status,
    payment_ref: outcome.status === 'succeeded' ? outcome.paymentRef : null,
    decline_code: outcome.status === 'declined' ? outcome.code : null,
    decline_reason: outcome.status === 'declined' ? outcome.reason : null,
    created_at: record.createdAt,
  };
}

/** A row back to a record; a row the CHECK constraints should have made impossible fails closed. */
export function mockRailChargeFromRow(row: MockRailChargeRow): MockRailCharge {
  if (row.currency !== 'usd') {
    throw new PaymentError('rail-unavailable', `mock rail charge ${row.idempotency_key} has an unknown currency`);
  }
  let outcome: ChargeOutcome;
  if (row.status === 'succeeded' && row.payment_ref !== null) {
    outcome = { status: 'succeeded', paymentRef: row.payment_ref };
  } else if (row.status === 'declined' && row.decline_code !== null && row.decline_reason !== null) {
    outcome = { status: 'declined', code: row.decline_code, reason: row.decline_reason };
  } else {
    throw new PaymentError('rail-unavailable', `mock rail charge ${row.idempotency_key} is unreadable`);
  }
  return {
    idempotencyKey: row.idempotency_key,
    invoiceId: row.invoice_id,
    merchantId: row.merchant_id,
    amountCents: row.amount_cents,
    currency: row.currency,
    outcome,
    createdAt: row.created_at,
  };
}
