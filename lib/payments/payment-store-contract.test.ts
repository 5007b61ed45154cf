/**
 * One contract for every payment store (SPEC §7, §10.10, §11): one payment per invoice, every
 * transition a compare-and-set, the receipt stored with the success. The shared part opens two
 * handles on one location (two SQLite connections, two PostgreSQL pools) and races them, then
 * runs the settlement service itself on both: 50 concurrent charges of one approved order make one
 * charge on the rail and one receipt.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { ApprovalRecord, Approvals, Household } from '../../identity/index';
import { openPostgresPool } from '../../proxy/index';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../../tests/support/postgres';
import { applyMigrations } from '../apply-migrations';
import { createMockRail, createSqliteMockRailStore, type MockRailStore, mockRailMigrations } from './mock-rail';
import { createSqlitePaymentStore, type PaymentStore, paymentsMigrations } from './payment-store';
import { createPostgresMockRailStore, postgresMockRailMigrations } from './postgres-mock-rail-store';
import { createPostgresPaymentStore, postgresPaymentsMigrations } from './postgres-payment-store';
import { createSettlement } from './settlement';

/** One handle on a location: the payments and the mock rail's ledger on one connection. */
interface Handle {
  readonly payments: PaymentStore;
  readonly rail: MockRailStore;
  /** How many charges the mock rail's ledger holds. */
  railCharges(): Promise<number>;
  close(): Promise<void>;
}

const handles: Handle[] = [];
const folders: string[] = [];
afterEach(async () => {
  await Promise.allSettled(handles.splice(0).map((handle) => handle.close()));
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** Each implementation: a fresh location, and a way to open an independent handle on it. */
const implementations: Record<string, { location(): Promise<string>; open(location: string): Promise<Handle> }> = {
  sqlite: {
    location: async () => {
      const folder = mkdtempSync(join(tmpdir(), 'payments-contract-'));
      folders.push(folder);
      return join(folder, 'household.sqlite');
    },
    open: async (path) => {
      const database = new Database(path);
      database.pragma('journal_mode = WAL');
      database.pragma('busy_timeout = 5000');
      applyMigrations(database, { payments: paymentsMigrations, 'mock-rail': mockRailMigrations });
      return {
        payments: createSqlitePaymentStore(database),
        rail: createSqliteMockRailStore(database),
        railCharges: async () =>
          (database.prepare('SELECT COUNT(*) AS n FROM mock_rail_charges').get() as { n: number }).n,
        close: async () => {
          database.close();
        },
      };
    },
  },
  ...(postgresAvailable && {
    postgres: {
      location: createTestDatabase,
      open: async (url: string) => {
        const pool = await openPostgresPool({
          url,
          migrations: { payments: postgresPaymentsMigrations, 'mock-rail': postgresMockRailMigrations },
          what: 'payment store',
        });
        return {
          payments: createPostgresPaymentStore(pool),
          rail: createPostgresMockRailStore(pool),
          railCharges: async () =>
            (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM mock_rail_charges')).rows[0]?.n ?? 0,
          close: () => pool.end(),
        };
      },
    },
  }),
};

it.skipIf(postgresAvailable)(`the PostgreSQL payment store is skipped: ${postgresUnavailable}`, () => {});

const payment = (invoiceId: string, createdAt = 1_000) => ({
  invoiceId,
  approvalId: `approval-${invoiceId}`,
  merchantId: 'did:web:pizza.example',
  amountCents: 1_500,
  currency: 'usd' as const,
  createdAt,
});

describe.each(Object.entries(implementations))('the %s payment store', (_name, kind) => {
  const open = async (location?: string): Promise<Handle> => {
    const handle = await kind.open(location ?? (await kind.location()));
    handles.push(handle);
    return handle;
  };

  describe('single instance', () => {
    it('begins one payment per invoice, and a second begin finds the first unchanged', async () => {
      const { payments } = await open();
      const first = await payments.begin(payment('inv-1'));
      expect(first).toEqual({
        created: true,
        record: { ...payment('inv-1'), state: 'charging', attempt: 1, updatedAt: 1_000 },
      });
      const second = await payments.begin({ ...payment('inv-1', 2_000), amountCents: 9_900 });
      expect(second).toEqual({ created: false, record: first.record });
      expect(await payments.get('inv-1')).toEqual(first.record);
      expect(await payments.get('inv-unknown')).toBeUndefined();
    });

    it('moves charging to succeeded once, with its reference and receipt, and never back', async () => {
      const { payments } = await open();
      await payments.begin(payment('inv-1'));
      expect(await payments.succeed('inv-1', { paymentRef: 'ref-1', receipt: 'receipt-1', now: 2_000 })).toBe(true);
      expect(await payments.succeed('inv-1', { paymentRef: 'ref-2', receipt: 'receipt-2', now: 3_000 })).toBe(false);
      expect(await payments.decline('inv-1', { reason: 'late', now: 3_000 })).toBe(false);
      expect(await payments.retry('inv-1', 3_000)).toBe(false);
      expect(await payments.get('inv-1')).toMatchObject({
        state: 'succeeded',
        paymentRef: 'ref-1',
        receipt: 'receipt-1',
        updatedAt: 2_000,
      });
      expect(await payments.succeed('inv-unknown', { paymentRef: 'r', receipt: 'r', now: 1 })).toBe(false);
    });

    it('retries a declined payment as the next attempt, and only a declined one', async () => {
      const { payments } = await open();
      await payments.begin(payment('inv-1'));
      expect(await payments.retry('inv-1', 1_500)).toBe(false);
      expect(await payments.decline('inv-1', { reason: 'insufficient funds', now: 2_000 })).toBe(true);
      expect(await payments.get('inv-1')).toMatchObject({
        state: 'declined',
        reason: 'insufficient funds',
        attempt: 1,
      });
      expect(await payments.retry('inv-1', 3_000)).toBe(true);
      expect(await payments.retry('inv-1', 3_000)).toBe(false);
      const retried = await payments.get('inv-1');
      expect(retried).toMatchObject({ state: 'charging', attempt: 2, updatedAt: 3_000 });
      expect(retried?.reason).toBeUndefined();
    });

    it('lists the payments in doubt, oldest first', async () => {
      const { payments } = await open();
      await payments.begin(payment('inv-b', 2_000));
      await payments.begin(payment('inv-c', 1_000));
      await payments.begin(payment('inv-a', 2_000));
      await payments.begin(payment('inv-paid', 500));
      await payments.succeed('inv-paid', { paymentRef: 'r', receipt: 'r', now: 600 });
      expect((await payments.listCharging()).map((record) => record.invoiceId)).toEqual(['inv-c', 'inv-a', 'inv-b']);
    });

    it('keeps payments across a reopen', async () => {
      const location = await kind.location();
      const first = await kind.open(location);
      await first.payments.begin(payment('inv-1'));
      await first.payments.succeed('inv-1', { paymentRef: 'ref', receipt: 'receipt', now: 2_000 });
      await first.close();
      expect(await (await open(location)).payments.get('inv-1')).toMatchObject({
        state: 'succeeded',
        receipt: 'receipt',
      });
    });
  });

  describe('shared: two handles on one location', () => {
    const twoHandles = async () => {
      const location = await kind.location();
      return [await open(location), await open(location)] as const;
    };

    it('begins one payment of 50 concurrent begins of one invoice through two handles', async () => {
      const both = await twoHandles();
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, (_, index) =>
          (both[index % 2] as Handle).payments.begin({ ...payment('inv-1'), approvalId: `approval-${index}` }),
        ),
      );
      const created = outcomes.filter((outcome) => outcome.created);
      expect(created).toHaveLength(1);
      expect(new Set(outcomes.map((outcome) => outcome.record.approvalId))).toEqual(
        new Set([created[0]?.record.approvalId]),
      );
    });

    it('lets one of 50 concurrent successes and one of 50 concurrent retries through two handles move the row', async () => {
      const both = await twoHandles();
      await both[0].payments.begin(payment('inv-1'));
      await both[0].payments.begin(payment('inv-2'));
      await both[1].payments.decline('inv-2', { reason: 'declined', now: 2_000 });
      const succeeded = await Promise.all(
        Array.from({ length: 50 }, (_, index) =>
          (both[index % 2] as Handle).payments.succeed('inv-1', {
            paymentRef: `ref-${index}`,
            receipt: `receipt-${index}`,
            now: 2_000,
          }),
        ),
      );
      expect(succeeded.filter(Boolean)).toHaveLength(1);
      const winner = succeeded.indexOf(true);
      expect(await both[1].payments.get('inv-1')).toMatchObject({
        paymentRef: `ref-${winner}`,
        receipt: `receipt-${winner}`,
      });
      const retried = await Promise.all(
        Array.from({ length: 50 }, (_, index) => (both[index % 2] as Handle).payments.retry('inv-2', 3_000)),
      );
      expect(retried.filter(Boolean)).toHaveLength(1);
      expect(await both[0].payments.get('inv-2')).toMatchObject({ state: 'charging', attempt: 2 });
    });

    it('makes one charge and one receipt of 50 concurrent settlements of one approved order through two handles', async () => {
      const both = await twoHandles();
      const order = {
        invoiceId: 'urn:uuid:0b5e0b7a-3f0e-4c53-9a57-6a0c4b1e2d01',
        approvalId: 'approval-1',
        invoiceHash: 'hash-1',
        merchantDid: 'did:web:pizza.example',
        totalCents: 1_500,
        status: 'approved',
      } as unknown as ApprovalRecord;
      let signed = 0;
      const settled: string[] = [];
      // The settlement service's collaborators outside payments: an approved order, and a signer.
      const household = {
        store: { approvals: { getByInvoice: async (id: string) => (id === order.invoiceId ? order : undefined) } },
        issue: async () => `receipt-${++signed}`,
      } as unknown as Household;
      const approvals = {
        settle: async ({ receipt }: { receipt: string }) => {
          settled.push(receipt);
          return { ok: true };
        },
      } as unknown as Approvals;
      const settlements = both.map((handle) =>
        createSettlement({
          household,
          approvals,
          payments: handle.payments,
          rail: createMockRail({ store: handle.rail }),
        }),
      );
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, (_, index) =>
          (settlements[index % 2] as ReturnType<typeof createSettlement>).charge({
            invoiceId: order.invoiceId,
            amountCents: 1_500,
            merchantId: 'did:web:pizza.example',
          }),
        ),
      );
      const stored = await both[0].payments.get(order.invoiceId);
      expect(stored).toMatchObject({ state: 'succeeded', attempt: 1 });
      // Every caller hears the one stored receipt; the rail charged once.
      expect(outcomes.every((outcome) => outcome.status === 'succeeded' && outcome.receipt === stored?.receipt)).toBe(
        true,
      );
      expect(await both[1].railCharges()).toBe(1);
      expect(new Set(settled)).toEqual(new Set([stored?.receipt]));
    });
  });
});

describe.skipIf(!postgresAvailable)('the PostgreSQL payments tables', () => {
  it('refuse what the store must never hold: bad cents, currency, state, attempt, a success without its receipt', async () => {
    const url = await createTestDatabase();
    const pool = await openPostgresPool({
      url,
      migrations: { payments: postgresPaymentsMigrations },
      what: 'payments',
    });
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const insert = (invoiceId: string, values: Record<string, unknown>) => {
        const row = {
          amount_cents: 1_500,
          currency: 'usd',
          state: 'charging',
          attempt: 1,
          payment_ref: null,
          receipt: null,
          ...values,
        };
        return client.query(
          `INSERT INTO payments (invoice_id, approval_id, merchant_id, amount_cents, currency, state, attempt,
             payment_ref, receipt, created_at, updated_at) VALUES ($1, 'a', 'm', $2, $3, $4, $5, $6, $7, 0, 0)`,
          [invoiceId, row.amount_cents, row.currency, row.state, row.attempt, row.payment_ref, row.receipt],
        );
      };
      await expect(insert('zero', { amount_cents: 0 })).rejects.toThrow(/check/);
      await expect(insert('eur', { currency: 'eur' })).rejects.toThrow(/check/);
      await expect(insert('lost', { state: 'lost' })).rejects.toThrow(/check/);
      await expect(insert('attempt', { attempt: 0 })).rejects.toThrow(/check/);
      await expect(insert('paid', { state: 'succeeded', payment_ref: 'ref' })).rejects.toThrow(/check/);
      await expect(insert('charging-ref', { payment_ref: 'ref', receipt: 'r' })).rejects.toThrow(/check/);
      await insert('ok', { state: 'succeeded', payment_ref: 'ref', receipt: 'r' });
      await expect(insert('ok', {})).rejects.toThrow(/duplicate key/);
    } finally {
      await client.end();
      await pool.end();
    }
  });
});
