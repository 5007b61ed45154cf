/**
 * One contract for every durable mock rail ledger (SPEC §7, §11): one charge per idempotency key,
 * through one handle or two on one location (two SQLite connections, two PostgreSQL pools).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { openPostgresPool } from '../../proxy/index';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../../tests/support/postgres';
import { applyMigrations } from '../apply-migrations';
import {
  createMockRail,
  createSqliteMockRailStore,
  type MockRailCharge,
  type MockRailStore,
  mockRailMigrations,
} from './mock-rail';
import { createPostgresMockRailStore, postgresMockRailMigrations } from './postgres-mock-rail-store';
import type { ChargeRequest } from './rail';

/** One handle on a location, and how many charges the ledger holds. */
interface Handle {
  readonly store: MockRailStore;
  count(): Promise<number>;
  close(): Promise<void>;
}

const handles: Handle[] = [];
const folders: string[] = [];
afterEach(async () => {
  await Promise.allSettled(handles.splice(0).map((handle) => handle.close()));
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

const implementations: Record<string, { location(): Promise<string>; open(location: string): Promise<Handle> }> = {
  sqlite: {
    location: async () => {
      const folder = mkdtempSync(join(tmpdir(), 'mock-rail-contract-'));
      folders.push(folder);
      return join(folder, 'household.sqlite');
    },
    open: async (path) => {
      const database = new Database(path);
      database.pragma('journal_mode = WAL');
      database.pragma('busy_timeout = 5000');
      applyMigrations(database, { 'mock-rail': mockRailMigrations });
      return {
        store: createSqliteMockRailStore(database),
        count: async () => (database.prepare('SELECT COUNT(*) AS n FROM mock_rail_charges').get() as { n: number }).n,
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
          migrations: { 'mock-rail': postgresMockRailMigrations },
          what: 'mock rail',
        });
        return {
          store: createPostgresMockRailStore(pool),
          count: async () =>
            (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM mock_rail_charges')).rows[0]?.n ?? 0,
          close: () => pool.end(),
        };
      },
    },
  }),
};

it.skipIf(postgresAvailable)(`the PostgreSQL mock rail ledger is skipped: ${postgresUnavailable}`, () => {});

const request: ChargeRequest = {
  idempotencyKey: 'urn:uuid:0b5e0b7a-3f0e-4c53-9a57-6a0c4b1e2d01',
  invoiceId: 'urn:uuid:0b5e0b7a-3f0e-4c53-9a57-6a0c4b1e2d01',
  merchantId: 'did:web:pizza.example',
  amountCents: 1_500,
  currency: 'usd',
};
const charge = (key: string, outcome: MockRailCharge['outcome']): MockRailCharge => ({
  ...request,
  idempotencyKey: key,
  outcome,
  createdAt: 1_700_000_000_000,
});

describe.each(Object.entries(implementations))('the %s mock rail ledger', (_name, kind) => {
  const open = async (location?: string): Promise<Handle> => {
    const handle = await kind.open(location ?? (await kind.location()));
    handles.push(handle);
    return handle;
  };

  it('records one charge per key, success or decline, and finds it as it was', async () => {
    const { store } = await open();
    const paid = charge('key-1', { status: 'succeeded', paymentRef: 'mock_1' });
    const declined = charge('key-2', { status: 'declined', code: 'do_not_honor', reason: 'the card was declined' });
    expect(await store.insert(paid)).toBe(true);
    expect(await store.insert({ ...paid, outcome: { status: 'succeeded', paymentRef: 'mock_other' } })).toBe(false);
    expect(await store.insert(declined)).toBe(true);
    expect(await store.find('key-1')).toEqual(paid);
    expect(await store.find('key-2')).toEqual(declined);
    expect(await store.find('key-3')).toBeUndefined();
  });

  it('keeps its charges across a reopen', async () => {
    const location = await kind.location();
    const first = await kind.open(location);
    await first.store.insert(charge('key-1', { status: 'succeeded', paymentRef: 'mock_1' }));
    await first.close();
    expect(await (await open(location)).store.find('key-1')).toMatchObject({ outcome: { paymentRef: 'mock_1' } });
  });

  it('lets one of 50 concurrent inserts of one key through two handles record it', async () => {
    const location = await kind.location();
    const both = [await open(location), await open(location)];
    const inserted = await Promise.all(
      Array.from({ length: 50 }, (_, index) =>
        (both[index % 2] as Handle).store.insert(charge('key', { status: 'succeeded', paymentRef: `mock_${index}` })),
      ),
    );
    expect(inserted.filter(Boolean)).toHaveLength(1);
    const winner = inserted.indexOf(true);
    for (const handle of both) {
      expect(await handle.store.find('key')).toMatchObject({ outcome: { paymentRef: `mock_${winner}` } });
    }
    expect(await both[0]?.count()).toBe(1);
  });

  it('answers 50 concurrent charges of one key through two handles with the one outcome it recorded', async () => {
    const location = await kind.location();
    const both = [await open(location), await open(location)];
    // Every other decision declines: whichever call records first, every caller must hear its outcome.
    let decisions = 0;
    const declineWhen = () => (decisions++ % 2 === 0 ? 'do_not_honor' : undefined);
    const rails = both.map((handle) => createMockRail({ store: handle.store, declineWhen }));
    const outcomes = await Promise.all(Array.from({ length: 50 }, (_, index) => rails[index % 2]?.charge(request)));
    expect(new Set(outcomes.map((outcome) => JSON.stringify(outcome))).size).toBe(1);
    expect(decisions).toBeGreaterThan(1);
    expect((await both[1]?.store.find(request.idempotencyKey))?.outcome).toEqual(outcomes[0]);
    expect(await both[1]?.count()).toBe(1);
  });
});

describe.skipIf(!postgresAvailable)('the PostgreSQL mock rail table', () => {
  it('refuses zero cents, another currency and an inconsistent outcome', async () => {
    const url = await createTestDatabase();
    const pool = await openPostgresPool({ url, migrations: { 'mock-rail': postgresMockRailMigrations }, what: 'rail' });
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const insert = (key: string, cents: number, currency: string, status: string, ...rest: (string | null)[]) =>
        client.query(
          `INSERT INTO mock_rail_charges (idempotency_key, invoice_id, merchant_id, amount_cents, currency, status,
             payment_ref, decline_code, decline_reason, created_at) VALUES ($1, 'i', 'm', $2, $3, $4, $5, $6, $7, 0)`,
          [key, cents, currency, status, ...rest],
        );
      await expect(insert('a', 0, 'usd', 'succeeded', 'ref', null, null)).rejects.toThrow(/check/);
      await expect(insert('b', 1_500, 'eur', 'succeeded', 'ref', null, null)).rejects.toThrow(/check/);
      await expect(insert('c', 1_500, 'usd', 'succeeded', null, null, null)).rejects.toThrow(/check/);
      await expect(insert('d', 1_500, 'usd', 'declined', 'ref', 'code', 'reason')).rejects.toThrow(/check/);
      await expect(insert('e', 1_500, 'usd', 'declined', null, 'code', null)).rejects.toThrow(/check/);
      await expect(insert('f', 1_500, 'usd', 'refunded', null, null, null)).rejects.toThrow(/check/);
      await insert('g', 1_500, 'usd', 'succeeded', 'ref', null, null);
      await expect(insert('g', 1_500, 'usd', 'succeeded', 'ref', null, null)).rejects.toThrow(/duplicate key/);
    } finally {
      await client.end();
      await pool.end();
    }
  });
});
