/**
 * One contract for every checkpoint lease store (docs/scale-out.md "One audit chain, several
 * writers"; issue 28), memory, SQLite and PostgreSQL: one holder at a time, taken over once
 * expired. The shared part runs two instances of the checkpointer on two handles of one household
 * store (two SQLite connections on one file, two `pg` pools on one database): each checkpoint
 * period is signed by one of them, never both, and the survivor of one that stopped signs on from
 * its checkpoint. An instance starting while the holder lives does not report the holder's rows
 * not signed yet; rows left unsigned by a holder that stopped within its lease, or appended while
 * nobody held it, are reported.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../../tests/support/postgres';
import { readHouseholdEnv } from '../env';
import type { HouseholdEvent } from '../events';
import { openPostgresHouseholdStore } from '../postgres-household-store';
import { type OpenIdentity, openIdentity } from '../start-identity';
import { type HouseholdStore, householdStoreLocation, openHouseholdStore, openSqliteHouseholdStore } from '../store';
import { type AuditCheckpointReport, type AuditCheckpoints, createAuditCheckpoints } from './audit-checkpoints';
import type { AuditHead } from './audit-log';
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
    expect(await second.holder()).toBeUndefined();
    expect(await first.claim({ owner: 'a', now: t0, ttlMs: 1000 })).toBe(true);
    expect(await second.holder()).toStrictEqual({ owner: 'a', expiresAt: t0 + 1000 });
    expect(await second.claim({ owner: 'b', now: t0 + 999, ttlMs: 1000 })).toBe(false);
    // The holder renews: still its own past the first expiry.
    expect(await first.claim({ owner: 'a', now: t0 + 500, ttlMs: 1000 })).toBe(true);
    expect(await second.holder()).toStrictEqual({ owner: 'a', expiresAt: t0 + 1500 });
    expect(await second.claim({ owner: 'b', now: t0 + 1200, ttlMs: 1000 })).toBe(false);
    // Expired: the other instance takes it, and the first one no longer holds it.
    expect(await second.claim({ owner: 'b', now: t0 + 1500, ttlMs: 1000 })).toBe(true);
    expect(await first.claim({ owner: 'a', now: t0 + 1600, ttlMs: 1000 })).toBe(false);
    // A release by another owner changes nothing; the holder's frees it at once.
    await first.release('a');
    expect(await first.claim({ owner: 'a', now: t0 + 1700, ttlMs: 1000 })).toBe(false);
    expect(await first.holder()).toStrictEqual({ owner: 'b', expiresAt: t0 + 2500 });
    await second.release('b');
    expect(await first.holder()).toBeUndefined();
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

/** The PostgreSQL table's own lines: one row, named `signer`, held by a named owner. */
describe.skipIf(!postgresAvailable)('the PostgreSQL checkpoint lease table', () => {
  it('refuses an empty owner and a row of another name, and keeps the holder', async () => {
    const postgres = shared.postgres as (typeof shared)['sqlite'];
    const url = await postgres.location();
    const { checkpointLease } = await postgres.open(url);
    await expect(checkpointLease.claim({ owner: '', now: t0, ttlMs: 1000 })).rejects.toThrow(
      /audit_checkpoint_lease_owner_check/,
    );
    expect(await checkpointLease.claim({ owner: 'a', now: t0, ttlMs: 1000 })).toBe(true);
    // The store only ever writes the row `signer`: a second row is SQL's alone to try.
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await expect(
        client.query("INSERT INTO audit_checkpoint_lease (name, owner, expires_at) VALUES ('signer-2', 'b', 0)"),
      ).rejects.toThrow(/audit_checkpoint_lease_name_check/);
    } finally {
      await client.end();
    }
    expect(await checkpointLease.holder()).toStrictEqual({ owner: 'a', expiresAt: t0 + 1000 });
  });
});

describe.each(Object.entries(shared))('two checkpointers on one %s household store', (_name, kind) => {
  /** Two instances of the checkpointer, each on its own handle, with its own owner id and clock. */
  const instances = async (clocks: readonly (() => Date)[] = [() => new Date(), () => new Date()]) => {
    const location = await kind.location();
    const stores = [await kind.open(location), await kind.open(location)];
    const checkpointers = stores.map((store, index) =>
      checkpointer(store, { owner: `instance-${index}`, now: clocks[index] as () => Date }),
    );
    return { stores: stores as [HouseholdStore, HouseholdStore], checkpointers };
  };
  /**
   * One instance's checkpointer on `store`. It renews its lease only when the test asks (a process
   * stopped without closing renews nothing), unless given `renewMs`.
   */
  const checkpointer = (
    store: HouseholdStore,
    options: {
      owner: string;
      now?: () => Date;
      ttlMs?: number;
      renewMs?: number;
      inherited?: AuditHead;
      reports?: AuditCheckpointReport[];
    },
  ): AuditCheckpoints =>
    createAuditCheckpoints({
      audit: store.audit,
      household: identity.household,
      store: store.checkpoints,
      lease: {
        store: store.checkpointLease,
        owner: options.owner,
        renewMs: options.renewMs ?? 1_000_000_000,
        ...(options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }),
      },
      // The test asks for each checkpoint itself.
      every: 1_000_000,
      ...(options.now === undefined ? {} : { now: options.now }),
      ...(options.inherited === undefined ? {} : { inherited: options.inherited }),
      // As the runtime does: each report is a row of the chain, and the checkpointer waits for it.
      report: async (report) => {
        options.reports?.push(report);
        await store.audit.append({ ...event, kind: report.kind, outcome: report.outcome, message: report.message });
      },
    });
  /** The unvouched tails among `reports`, by their rows. */
  const unvouched = (reports: readonly AuditCheckpointReport[]) =>
    reports.filter((report) => report.kind === 'audit-tail-unvouched').map((report) => report.data);
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

  // The lease's term in these tests: short, so a judgement waits two thirds of it at most.
  const ttlMs = 1500;

  it('does not report the rows a live holder has not signed yet when another instance starts; the holder signs them', async () => {
    const location = await kind.location();
    const [one, two] = [await kind.open(location), await kind.open(location)];
    // The holder renews every third of its term while it lives.
    const holder = checkpointer(one, { owner: 'holder', ttlMs, renewMs: ttlMs / 3 });
    await append([one, one], 10);
    expect((await holder.checkpoint())?.rowId).toBe(10);
    await append([one, one], 10);
    // A second instance starts now: rows 11 to 20 are the holder's, not signed yet.
    const reports: AuditCheckpointReport[] = [];
    const starting = checkpointer(two, { owner: 'starting', ttlMs, inherited: await two.audit.head(), reports });
    expect(await starting.checkpoint()).toBeUndefined();
    // Closing waits for the holder's renewal, which shows it alive: nothing to report.
    await starting.close();
    expect(unvouched(reports)).toStrictEqual([]);
    expect((await holder.checkpoint())?.rowId).toBe(20);
    await holder.close();
    expect(await rowIds(one)).toStrictEqual([10, 20]);
  });

  it('reports the rows a holder left unsigned when it stopped within its lease, once the lease shows it stopped', async () => {
    const location = await kind.location();
    const [one, two] = [await kind.open(location), await kind.open(location)];
    // The holder signs row 10, writes 10 more and stops without closing: it renews nothing more.
    const holder = checkpointer(one, { owner: 'holder', ttlMs });
    await append([one, one], 10);
    expect((await holder.checkpoint())?.rowId).toBe(10);
    await append([one, one], 10);
    const reports: AuditCheckpointReport[] = [];
    const starting = checkpointer(two, { owner: 'starting', ttlMs, inherited: await two.audit.head(), reports });
    // Its lease is still live: nothing is said yet, nothing signed.
    expect(await starting.checkpoint()).toBeUndefined();
    expect(unvouched(reports)).toStrictEqual([]);
    await starting.close();
    expect(unvouched(reports)).toStrictEqual([{ fromRow: 11, toRow: 20, checkpointRow: 10 }]);
  });

  it('reports the rows appended while nobody held the lease, at once: after a close, and after a lease expired', async () => {
    const location = await kind.location();
    const [one, two] = [await kind.open(location), await kind.open(location)];
    const first = checkpointer(one, { owner: 'first', ttlMs });
    await append([one, one], 10);
    await first.close();
    expect(await rowIds(one)).toStrictEqual([10]);
    // Appended with no signer running (an edit of the database, a process without a checkpointer).
    await append([one, one], 5);
    const reports: AuditCheckpointReport[] = [];
    const second = checkpointer(two, { owner: 'second', ttlMs, inherited: await two.audit.head(), reports });
    expect((await second.checkpoint())?.rowId).toBeGreaterThan(15);
    expect(unvouched(reports)).toStrictEqual([{ fromRow: 11, toRow: 15, checkpointRow: 10 }]);
    // The second stops without closing; an hour later its lease has long expired, and five more rows came.
    const signed = (await rowIds(one)).at(-1) ?? 0;
    await append([one, one], 5);
    const later = () => new Date(Date.now() + 60 * 60 * 1000);
    const laterReports: AuditCheckpointReport[] = [];
    const third = checkpointer(one, {
      owner: 'third',
      ttlMs,
      now: later,
      inherited: await one.audit.head(),
      reports: laterReports,
    });
    expect(await third.checkpoint()).toBeDefined();
    expect(unvouched(laterReports)).toStrictEqual([{ fromRow: signed + 1, toRow: signed + 5, checkpointRow: signed }]);
    await third.close();
  });
});
