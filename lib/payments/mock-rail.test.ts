import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyMigrations } from '../apply-migrations';
import {
  createMemoryMockRailStore,
  createMockRail,
  createSqliteMockRailStore,
  type MockRailCharge,
  mockPaymentRef,
  mockRailMigrations,
} from './mock-rail';
import { PaymentError } from './payment-error';
import type { ChargeRequest } from './rail';

const request: ChargeRequest = {
  idempotencyKey: 'urn:uuid:0b5e0b7a-3f0e-4c53-9a57-6a0c4b1e2d01',
  invoiceId: 'urn:uuid:0b5e0b7a-3f0e-4c53-9a57-6a0c4b1e2d01',
  merchantId: 'did:web:pizza.example',
  amountCents: 1_500,
  currency: 'usd',
};

let folder: string;
beforeEach(() => {
  folder = mkdtempSync(join(tmpdir(), 'mock-rail-'));
});
afterEach(() => {
  rmSync(folder, { recursive: true, force: true });
});

function openDatabase(): Database.Database {
  const database = new Database(join(folder, 'household.sqlite'));
  database.pragma('journal_mode = WAL');
  database.pragma('busy_timeout = 5000');
  applyMigrations(database, { 'mock-rail': mockRailMigrations });
  return database;
}

describe('mock rail', () => {
  it('the payment reference is mock_ + the first 24 hex digits of SHA-256(key)', async () => {
    const expected = `mock_${createHash('sha256').update(request.idempotencyKey).digest('hex').slice(0, 24)}`;
    expect(mockPaymentRef(request.idempotencyKey)).toBe(expected);
    const outcome = await createMockRail({ store: createMemoryMockRailStore() }).charge(request);
    expect(outcome).toEqual({ status: 'succeeded', paymentRef: expected });
  });

  it('a key charged in one process is replayed after a restart on the same file, not charged again', async () => {
    const first = openDatabase();
    const outcome = await createMockRail({ store: createSqliteMockRailStore(first) }).charge(request);
    first.close();

    const second = openDatabase();
    let declinesAsked = 0;
    const rail = createMockRail({
      store: createSqliteMockRailStore(second),
      declineWhen: () => {
        declinesAsked += 1;
        return 'insufficient_funds';
      },
    });
    // The stored success wins over what the rail would decide now.
    await expect(rail.charge(request)).resolves.toEqual(outcome);
    expect(declinesAsked).toBe(0);
    expect(second.prepare('SELECT COUNT(*) AS n FROM mock_rail_charges').get()).toEqual({ n: 1 });
    second.close();
  });

  it('two connections to the same file racing on one key record one charge and agree', async () => {
    const databases = [openDatabase(), openDatabase()];
    // The first decision declines, every later one would succeed: only the recorded first outcome may come back.
    let decisions = 0;
    const declineWhen = () => (decisions++ === 0 ? 'do_not_honor' : undefined);
    const rails = databases.map((database) =>
      createMockRail({ store: createSqliteMockRailStore(database), declineWhen }),
    );
    const outcomes = await Promise.all(Array.from({ length: 20 }, (_, index) => rails[index % 2]?.charge(request)));
    expect(new Set(outcomes.map((outcome) => JSON.stringify(outcome))).size).toBe(1);
    expect(outcomes[0]).toMatchObject({ status: 'declined', code: 'do_not_honor' });
    expect(decisions).toBeGreaterThan(1);
    expect(databases[0]?.prepare('SELECT COUNT(*) AS n FROM mock_rail_charges').get()).toEqual({ n: 1 });
    for (const database of databases) database.close();
  });

  it('a decline is recorded with its code and reason and replayed for the same key', async () => {
    const database = openDatabase();
    const rail = createMockRail({
      store: createSqliteMockRailStore(database),
      declineWhen: () => 'card_velocity_exceeded',
    });
    const outcome = await rail.charge(request);
    expect(outcome).toMatchObject({ status: 'declined', code: 'card_velocity_exceeded' });
    const replayed = await createMockRail({ store: createSqliteMockRailStore(database) }).charge(request);
    expect(replayed).toEqual(outcome);
    database.close();
  });

  it('the same key with another invoice, merchant or amount is refused, naming what differs', async () => {
    const rail = createMockRail({ store: createMemoryMockRailStore() });
    await rail.charge(request);
    for (const [changed, named] of [
      [{ invoiceId: 'urn:uuid:other' }, 'invoice'],
      [{ merchantId: 'did:web:other.example' }, 'merchant'],
      [{ amountCents: 1_499 }, 'amount'],
    ] as const) {
      const error = await rail.charge({ ...request, ...changed }).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(PaymentError);
      expect(error).toMatchObject({ code: 'idempotency-conflict', message: expect.stringContaining(named) });
    }
  });

  it('afterCharge runs once, after the charge is recorded, only on the call that recorded it', async () => {
    const store = createMemoryMockRailStore();
    const seen: (MockRailCharge | undefined)[] = [];
    const rail = createMockRail({
      store,
      faults: {
        afterCharge: async (charged) => {
          seen.push(await store.find(charged.idempotencyKey));
          throw new PaymentError('rail-timeout', 'simulated crash after the charge');
        },
      },
    });
    await expect(rail.charge(request)).rejects.toMatchObject({ code: 'rail-timeout' });
    await expect(rail.charge(request)).resolves.toMatchObject({ status: 'succeeded' });
    expect(seen).toHaveLength(1);
    expect(seen[0]?.outcome.status).toBe('succeeded');
  });

  it('the table refuses float cents, another currency and an inconsistent outcome', () => {
    const database = openDatabase();
    const insert = database.prepare(
      `INSERT INTO mock_rail_charges (idempotency_key, invoice_id, merchant_id, amount_cents, currency, status,
         payment_ref, decline_code, decline_reason, created_at) VALUES (?, 'i', 'm', ?, ?, ?, ?, ?, ?, 0)`,
    );
    expect(() => insert.run('a', 15.5, 'usd', 'succeeded', 'ref', null, null)).toThrow();
    expect(() => insert.run('b', 1500, 'eur', 'succeeded', 'ref', null, null)).toThrow();
    expect(() => insert.run('c', 1500, 'usd', 'succeeded', null, null, null)).toThrow();
    expect(() => insert.run('d', 1500, 'usd', 'declined', 'ref', 'code', 'reason')).toThrow();
    expect(() => insert.run('e', 0, 'usd', 'succeeded', 'ref', null, null)).toThrow();
    expect(() => insert.run('f', 1500, 'usd', 'succeeded', 'ref', null, null)).not.toThrow();
    database.close();
  });

  it('a malformed request touches no store', async () => {
    let touched = 0;
    const rail = createMockRail({
      store: {
        find: async () => {
          touched += 1;
          return undefined;
        },
        insert: async () => {
          touched += 1;
          return true;
        },
      },
    });
    for (const bad of [{ amountCents: 12.5 }, { currency: 'eur' }, { idempotencyKey: '' }, { extra: 1 }]) {
      await expect(rail.charge({ ...request, ...bad } as ChargeRequest)).rejects.toMatchObject({
        code: 'invalid-request',
      });
    }
    expect(touched).toBe(0);
  });
});
