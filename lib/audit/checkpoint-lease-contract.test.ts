/**
 * One contract for every checkpoint lease store (docs/scale-out.md "One audit chain, several
 * writers"; issue 28), memory, SQLite and PostgreSQL: one holder at a time, taken over once
 * expired. The shared part runs two instances of the checkpointer on two handles of one household
 * store (two SQLite connections on one file, two `pg` pools on one database): each checkpoint
 * period is signed by one of them, never both, and the survivor of one that stopped signs on from
 * its checkpoint.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../../tests/support/postgres';
import { readHouseholdEnv } from '../env';
import type { HouseholdEvent } from '../events';
import { openPostgresHouseholdStore } from '../postgres-household-store';
import { type OpenIdentity, openIdentity } from '../start-identity';
import { type HouseholdStore, householdStoreLocation, openHouseholdStore, openSqliteHouseholdStore } from '../store';
import { type AuditCheckpoints, createAuditCheckpoints } from './audit-checkpoints';
import { type CheckpointLeaseStore, createMemoryCheckpointLeaseStore } from './checkpoint-lease';

const closers: (() => Promise<void> | void)[] = [];
const folders: string[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** The household whose admin signs the checkpoints. */
let identity: OpenIdentity;
beforeAll(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'checkpoint-lease-admin-'));
  folders.push(dataDir);
  const env = readHouseholdEnv({ EXTENSIBLE_MCP_DATA: dataDir });
  identity = await openIdentity(env, { store: await openHouseholdStore(householdStoreLocation(env)) });
});
afterAll(() => identity?.close());

/** Each implementation: a fresh location, and an independent household store handle on it. */
const shared: Record<string, { location(): Promise<string>; open(location: string): Promise<HouseholdStore> }> = {
  sqlite: {
    location: async () => {
      const made = mkdtempSync(join(tmpdir(), 'checkpoint-lease-'));
      folders.push(made);
      return join(made, 'household.sqlite');
    },
    open: async (path) => {
      const store = openSqliteHouseholdStore({ path });
      closers.push(() => store.close());
      return store;
    },
  },
  ...(postgresAvailable && {
    postgres: {
      location: createTestDatabase,
      open: async (url: string) => {
        const store = await openPostgresHouseholdStore({ url });
        closers.push(() => store.close());
        return store;
      },
    },
  }),
};

const leaseStores: Record<string, () => Promise<CheckpointLeaseStore[]>> = {
  memory: async () => {
    const store = createMemoryCheckpointLeaseStore();
    return [store, store];
  },
  ...Object.fromEntries(
    Object.entries(shared).map(([name, kind]) => [
      name,
      async () => {
        const location = await kind.location();
        return [(await kind.open(location)).checkpointLease, (await kind.open(location)).checkpointLease];
      },
    ]),
  ),
};

it.skipIf(postgresAvailable)(`the PostgreSQL checkpoint lease is skipped: ${postgresUnavailable}`, () => {});

const t0 = 1_750_000_000_000;
const event: HouseholdEvent = {
  at: '2026-11-30T12:00:00.000Z',
  source: 'runtime',
  kind: 'merchant-pinned',
  outcome: 'ok',
  message: 'pinned the shop',
};

describe.each(Object.entries(leaseStores))('the %s checkpoint lease', (_name, open) => {
  it('has one holder until it expires or is released; the holder renews it', async () => {
    const [first, second] = (await open()) as [CheckpointLeaseStore, CheckpointLeaseStore];
    expect(await first.claim({ owner: 'a', now: t0, ttlMs: 1000 })).toBe(true);
    expect(await second.claim({ owner: 'b', now: t0 + 999, ttlMs: 1000 })).toBe(false);
    // The holder renews: still its own past the first expiry.
    expect(await first.claim({ owner: 'a', now: t0 + 500, ttlMs: 1000 })).toBe(true);
    expect(await second.claim({ owner: 'b', now: t0 + 1200, ttlMs: 1000 })).toBe(false);
    // Expired: the other instance takes it, and the first one no longer holds it.
    expect(await second.claim({ owner: 'b', now: t0 + 1500, ttlMs: 1000 })).toBe(true);
    expect(await first.claim({ owner: 'a', now: t0 + 1600, ttlMs: 1000 })).toBe(false);
    // A release by another owner changes nothing; the holder's frees it at once.
    await first.release('a');
    expect(await first.claim({ owner: 'a', now: t0 + 1700, ttlMs: 1000 })).toBe(false);
    await second.release('b');
    expect(await first.claim({ owner: 'a', now: t0 + 1700, ttlMs: 1000 })).toBe(true);
  });

  it('gives an expired lease to exactly one of 40 concurrent claimants through two handles, five rounds', async () => {
    const stores = await open();
    for (let round = 0; round < 5; round += 1) {
      const now = t0 + round * 10_000;
      const claims = await Promise.all(
        Array.from({ length: 40 }, (_, index) =>
          (stores[index % 2] as CheckpointLeaseStore).claim({ owner: `owner-${round}-${index}`, now, ttlMs: 5000 }),
        ),
      );
      expect(claims.filter(Boolean)).toHaveLength(1);
    }
  });
});

describe.each(Object.entries(shared))('two checkpointers on one %s household store', (_name, kind) => {
  /** Two instances of the checkpointer, each on its own handle, with its own owner id and clock. */
  const instances = async (clocks: readonly (() => Date)[] = [() => new Date(), () => new Date()]) => {
    const location = await kind.location();
    const stores = [await kind.open(location), await kind.open(location)];
    const checkpointers = stores.map((store, index) =>
      createAuditCheckpoints({
        audit: store.audit,
        household: identity.household,
        store: store.checkpoints,
        lease: { store: store.checkpointLease, owner: `instance-${index}` },
        // The test asks for each checkpoint itself.
        every: 1_000_000,
        now: clocks[index] as () => Date,
      }),
    );
    return { stores: stores as [HouseholdStore, HouseholdStore], checkpointers };
  };
  /** Appends `count` rows, alternately through both handles. */
  const append = async (stores: readonly HouseholdStore[], count: number) => {
    for (let index = 0; index < count; index += 1) await (stores[index % 2] as HouseholdStore).audit.append(event);
  };
  const rowIds = async (store: HouseholdStore) =>
    (await store.checkpoints.entries()).map((entry) => (entry as { rowId: number }).rowId);

  it('signs each checkpoint period once, by the lease holder, when both instances ask at once', async () => {
    const { stores, checkpointers } = await instances();
    const signers: number[] = [];
    for (let period = 1; period <= 5; period += 1) {
      await append(stores, 20);
      const signed = await Promise.all(checkpointers.map((checkpointer) => checkpointer.checkpoint()));
      expect(signed.filter((checkpoint) => checkpoint !== undefined)).toHaveLength(1);
      signers.push(signed.findIndex((checkpoint) => checkpoint !== undefined));
    }
    expect(await rowIds(stores[1])).toStrictEqual([20, 40, 60, 80, 100]);
    // The holder renews at each checkpoint: one instance signed all five.
    expect(new Set(signers).size).toBe(1);
    for (const checkpointer of checkpointers) await checkpointer.close();
    // Closing signs nothing more: the head is signed already.
    expect(await rowIds(stores[0])).toStrictEqual([20, 40, 60, 80, 100]);
  });

  it('passes the lease on at close, and on expiry when the holder stopped: the other signs on from its checkpoint', async () => {
    // The instances' clocks agree; the test moves both on at once, past the first one's lease.
    let skew = 0;
    const clock = () => new Date(Date.now() + skew);
    const { stores, checkpointers } = await instances([clock, clock]);
    const [first, second] = checkpointers as [AuditCheckpoints, AuditCheckpoints];
    await append(stores, 10);
    expect((await first.checkpoint())?.rowId).toBe(10);
    await append(stores, 10);
    // The first still holds the lease: the second signs nothing.
    expect(await second.checkpoint()).toBeUndefined();
    // The first stops without closing (its process died); an hour later its lease has expired, and the second signs.
    skew = 60 * 60 * 1000;
    expect((await second.checkpoint())?.rowId).toBe(20);
    await append(stores, 10);
    // The first is back and finds the lease taken.
    expect(await first.checkpoint()).toBeUndefined();
    // The second closes: it signs the head and frees the lease, so the first signs the next period at once.
    await second.close();
    // The head the second signed at close is not signed again.
    expect(await first.checkpoint()).toBeUndefined();
    await append(stores, 10);
    expect((await first.checkpoint())?.rowId).toBe(40);
    await first.close();
    expect(await rowIds(stores[0])).toStrictEqual([10, 20, 30, 40]);
    expect(first.refused()).toBeUndefined();
  });
});
