/**
 * One contract for every evidence store (SPEC §4.7, §10.6, §11): reserve-then-spend is atomic over
 * all of a call's ids, a reservation's lease lapses, an in-doubt entry never does, and no held id
 * is ever evicted. The shared part opens two handles on one location (two SQLite connections, two
 * PostgreSQL pools) and races them, which SQLite's single writer never lets happen.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../../tests/support/postgres';
import type { EvidenceStore, ReserveResult } from './evidence-store';
import { openPostgresEvidenceStore } from './postgres-evidence-store';
import { openSqliteEvidenceStore } from './sqlite-evidence-store';

const stores: EvidenceStore[] = [];
const folders: string[] = [];
afterEach(async () => {
  await Promise.allSettled(stores.splice(0).map((store) => store.close()));
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** What every test opens a store with. */
interface Settings {
  readonly capacity: number;
  readonly leaseMs: number;
}

/** Each implementation: a fresh location, and a way to open an independent handle on it. */
const implementations: Record<
  string,
  { location(): Promise<string>; open(location: string, settings: Settings): Promise<EvidenceStore> }
> = {
  sqlite: {
    location: async () => {
      const folder = mkdtempSync(join(tmpdir(), 'evidence-contract-'));
      folders.push(folder);
      return join(folder, 'evidence.sqlite');
    },
    open: async (path, settings) => openSqliteEvidenceStore({ path, ...settings }),
  },
  ...(postgresAvailable && {
    postgres: {
      location: createTestDatabase,
      open: (url: string, settings: Settings) => openPostgresEvidenceStore({ url, ...settings }),
    },
  }),
};

it.skipIf(postgresAvailable)(`the PostgreSQL evidence store is skipped: ${postgresUnavailable}`, () => {});

/** Evidence ids expiring long after every clock these tests use. */
const evidence = (...ids: string[]) => ids.map((id) => ({ id, expiresAt: 1_000_000_000 }));

describe.each(Object.entries(implementations))('the %s evidence store', (_name, kind) => {
  const open = async (options: Partial<Settings> & { location?: string } = {}): Promise<EvidenceStore> => {
    const store = await kind.open(options.location ?? (await kind.location()), {
      capacity: options.capacity ?? 10,
      leaseMs: options.leaseMs ?? 1_000,
    });
    stores.push(store);
    return store;
  };
  const reserved = async (store: EvidenceStore, ids: string[], now: number, fingerprint = 'f1') => {
    const result = await store.reserve(evidence(...ids), now, { fingerprint });
    if (!result.ok) throw new Error(`reserve failed: ${result.reason}`);
    return result.reservation;
  };

  describe('single instance', () => {
    it('holds every id of a call, and refuses any call that names one of them', async () => {
      const store = await open();
      const reservation = await reserved(store, ['a', 'b'], 1_000);
      expect(await store.isSpent('a', 1_000)).toBe(true);
      expect(await store.isSpent('c', 1_000)).toBe(false);
      expect(await store.reserve(evidence('c', 'b'), 1_000)).toEqual({
        ok: false,
        reason: 'spent',
        id: 'b',
        held: [{ id: 'b', state: 'reserved', reservation, fingerprint: 'f1' }],
      });
      // The refused call held nothing: c is still free.
      expect(await store.lookup(['c'], 1_000)).toEqual([]);
      expect((await store.reserve(evidence('c'), 1_000)).ok).toBe(true);
    });

    it('lets a reservation lapse with its lease, and never an in-doubt one (not even past its evidence)', async () => {
      const store = await open();
      await reserved(store, ['lapses'], 1_000);
      const inDoubt = await reserved(store, ['stays'], 1_000);
      await store.markInDoubt(inDoubt);
      expect(await store.isSpent('lapses', 1_999)).toBe(true);
      expect(await store.isSpent('lapses', 2_000)).toBe(false);
      // Far past the lease and past the evidence's own exp.
      const later = 2_000_000_000;
      expect((await store.reserve([{ id: 'lapses', expiresAt: later + 10_000 }], later)).ok).toBe(true);
      expect(await store.reserve([{ id: 'stays', expiresAt: later + 10_000 }], later)).toMatchObject({
        ok: false,
        reason: 'spent',
        held: [{ id: 'stays', state: 'in-doubt', fingerprint: 'f1' }],
      });
      expect(await store.isSpent('stays', later)).toBe(true);
    });

    it("keeps an in-doubt entry's sender lease for every reader, never as a lease on the entry, and clears it when the sender is done", async () => {
      const store = await open();
      const reservation = await reserved(store, ['sent', 'also-sent'], 1_000);
      await store.markInDoubt(reservation, { sendingUntil: 4_000 });
      const sending = { state: 'in-doubt', reservation, fingerprint: 'f1', sendingUntil: 4_000 };
      expect(await store.lookup(['sent', 'also-sent'], 1_500)).toEqual([
        { id: 'sent', ...sending },
        { id: 'also-sent', ...sending },
      ]);
      // Past the sender's lease and far past the reservation's: still held, the lease still told.
      expect(await store.reserve(evidence('sent'), 500_000_000)).toMatchObject({
        ok: false,
        held: [{ id: 'sent', state: 'in-doubt', sendingUntil: 4_000 }],
      });
      // The sender is done and the outcome unknown: held, with no sender's lease.
      await store.markInDoubt(reservation);
      expect(await store.lookup(['sent'], 500_000_000)).toEqual([
        { id: 'sent', state: 'in-doubt', reservation, fingerprint: 'f1' },
      ]);
      // Spent, it has none either.
      await store.markInDoubt(reservation, { sendingUntil: 9_000 });
      await store.commit(reservation, { result: 'r' });
      expect(await store.lookup(['sent'], 1_500)).toEqual([
        { id: 'sent', state: 'spent', reservation, fingerprint: 'f1', result: 'r' },
      ]);
    });

    it('keeps spent evidence until its own expiry, then lets its id be used again', async () => {
      const store = await open();
      const result = await store.reserve([{ id: 'once', expiresAt: 5_000 }], 1_000);
      if (!result.ok) throw new Error('reserve failed');
      await store.commit(result.reservation);
      // Past the lease, before the evidence's exp: still spent.
      expect(await store.reserve([{ id: 'once', expiresAt: 9_000 }], 4_999)).toMatchObject({ ok: false });
      expect((await store.reserve([{ id: 'once', expiresAt: 9_000 }], 5_000)).ok).toBe(true);
    });

    it('reports every held id of a refused call with its state, fingerprint and result, and holds nothing new', async () => {
      const store = await open();
      const reservation = await reserved(store, ['a', 'b'], 1_000, 'first-call');
      await store.markInDoubt(reservation);
      await store.commit(reservation, { result: '{"content":[]}' });
      const refused = await store.reserve(
        [
          { id: 'fresh', expiresAt: 9_000 },
          { id: 'b', expiresAt: 9_000 },
        ],
        1_500,
        { fingerprint: 'second-call' },
      );
      expect(refused).toEqual({
        ok: false,
        reason: 'spent',
        id: 'b',
        held: [{ id: 'b', state: 'spent', reservation, fingerprint: 'first-call', result: '{"content":[]}' }],
      });
      expect(await store.lookup(['fresh', 'a'], 1_500)).toEqual([
        { id: 'a', state: 'spent', reservation, fingerprint: 'first-call', result: '{"content":[]}' },
      ]);
    });

    it('frees an in-doubt reservation on release; commit and markInDoubt then refuse it', async () => {
      const store = await open();
      const reservation = await reserved(store, ['x'], 1_000);
      await store.markInDoubt(reservation);
      await store.release(reservation);
      expect(await store.lookup(['x'], 1_000)).toEqual([]);
      await expect(store.commit(reservation)).rejects.toMatchObject({ code: 'store-failed' });
      await expect(store.markInDoubt(reservation)).rejects.toMatchObject({ code: 'store-failed' });
      // Releasing again is a no-op.
      await store.release(reservation);
    });

    it('refuses to move a spent reservation back, to commit it twice, or to release it', async () => {
      const store = await open();
      const reservation = await reserved(store, ['s'], 1_000);
      await store.commit(reservation, { result: 'r' });
      await expect(store.markInDoubt(reservation)).rejects.toMatchObject({ code: 'store-failed' });
      await expect(store.commit(reservation, { result: 'other' })).rejects.toMatchObject({ code: 'store-failed' });
      await store.release(reservation);
      expect(await store.lookup(['s'], 1_000)).toMatchObject([{ state: 'spent', result: 'r' }]);
    });

    it('holds nothing for a call that names one id twice', async () => {
      const store = await open();
      expect(await store.reserve(evidence('fresh', 'dup', 'dup'), 1_000)).toEqual({
        ok: false,
        reason: 'spent',
        id: 'dup',
        held: [],
      });
      expect(await store.lookup(['fresh', 'dup'], 1_000)).toEqual([]);
    });

    it('refuses a call beyond its capacity rather than evict a held id, and counts only live entries', async () => {
      const store = await open({ capacity: 3 });
      await reserved(store, ['a', 'b'], 1_000);
      expect(await store.reserve(evidence('c', 'd'), 1_000)).toEqual({ ok: false, reason: 'full' });
      expect(await store.lookup(['c', 'd'], 1_000)).toEqual([]);
      await reserved(store, ['c'], 1_000);
      expect(await store.reserve(evidence('d'), 1_000)).toEqual({ ok: false, reason: 'full' });
      expect((await store.lookup(['a', 'b', 'c'], 1_000)).map((entry) => entry.id)).toEqual(['a', 'b', 'c']);
      // Once the leases lapse, the room is there again.
      expect((await store.reserve(evidence('d'), 2_000)).ok).toBe(true);
    });

    it('settles a reservation only while it holds every id it took', async () => {
      const store = await open();
      const first = await reserved(store, ['x', 'y'], 1_000);
      // The lease lapsed; another call takes one of its ids.
      await reserved(store, ['x'], 2_000, 'second');
      await expect(store.markInDoubt(first)).rejects.toMatchObject({ code: 'store-failed' });
      await expect(store.commit(first)).rejects.toMatchObject({ code: 'store-failed' });
      expect(await store.lookup(['x'], 2_000)).toMatchObject([{ id: 'x', state: 'reserved', fingerprint: 'second' }]);
    });

    it('keeps an in-doubt entry across closing and reopening', async () => {
      const location = await kind.location();
      const first = await open({ location });
      await first.markInDoubt(await reserved(first, ['durable'], 1_000));
      await first.close();
      stores.splice(stores.indexOf(first), 1);
      expect(await (await open({ location })).lookup(['durable'], 2_000_000_000)).toMatchObject([
        { state: 'in-doubt' },
      ]);
    });
  });

  describe('shared: two handles on one location', () => {
    const twoHandles = async (settings: Partial<Settings> = {}) => {
      const location = await kind.location();
      return [await open({ ...settings, location }), await open({ ...settings, location })] as const;
    };

    it('sees through one handle what the other holds, settles and releases', async () => {
      const [a, b] = await twoHandles();
      const reservation = await reserved(a, ['x'], 1_000);
      expect(await b.reserve(evidence('x'), 1_000)).toMatchObject({ ok: false, reason: 'spent', id: 'x' });
      // Settled through the other handle, past its lease: in doubt holds it for good.
      await b.markInDoubt(reservation);
      expect(await a.lookup(['x'], 2_000_000_000)).toMatchObject([{ state: 'in-doubt' }]);
      await a.release(reservation);
      expect((await b.reserve(evidence('x'), 5_000)).ok).toBe(true);
    });

    it('lets exactly one of 50 concurrent reservations of one id set through two handles hold it, every round', async () => {
      const handles = await twoHandles({ capacity: 1_000 });
      for (let round = 0; round < 5; round += 1) {
        const ids = [`p-${round}`, `q-${round}`, `r-${round}`];
        const outcomes = await Promise.all(
          Array.from({ length: 50 }, (_, index) =>
            (handles[index % 2] as EvidenceStore).reserve(
              evidence(...(index % 3 === 0 ? [...ids].reverse() : ids)),
              1_000,
              {
                fingerprint: `call-${index}`,
              },
            ),
          ),
        );
        const winners = outcomes.filter((outcome) => outcome.ok);
        expect(winners).toHaveLength(1);
        expect(outcomes.every((outcome) => outcome.ok || outcome.reason === 'spent')).toBe(true);
        const [winner] = winners as Extract<ReserveResult, { ok: true }>[];
        const held = await (handles[round % 2] as EvidenceStore).lookup(ids, 1_000);
        expect(held.map((entry) => [entry.id, entry.reservation])).toEqual(ids.map((id) => [id, winner?.reservation]));
      }
    });

    it('never lets two concurrent calls with overlapping id sets hold one id, and never deadlocks', async () => {
      const handles = await twoHandles({ capacity: 1_000 });
      for (let round = 0; round < 5; round += 1) {
        const pool = ['a', 'b', 'c', 'd', 'e'].map((id) => `${id}-${round}`);
        // Every pair of the five ids, in both orders: each call overlaps with most others.
        const calls = pool.flatMap((first, i) => pool.flatMap((second, j) => (i === j ? [] : [[first, second]])));
        const outcomes = await Promise.all(
          calls.map((ids, index) => (handles[index % 2] as EvidenceStore).reserve(evidence(...ids), 1_000)),
        );
        const holders = new Map<string, string>();
        outcomes.forEach((outcome, index) => {
          if (!outcome.ok) return;
          for (const id of calls[index] ?? []) {
            expect(holders.has(id)).toBe(false);
            holders.set(id, outcome.reservation);
          }
        });
        // At least two disjoint pairs of five ids can be held, and at most two.
        expect(outcomes.filter((outcome) => outcome.ok).length).toBeGreaterThanOrEqual(1);
        expect(outcomes.filter((outcome) => outcome.ok).length).toBeLessThanOrEqual(2);
        const held = await (handles[0] as EvidenceStore).lookup(pool, 1_000);
        expect(new Map(held.map((entry) => [entry.id, entry.reservation]))).toEqual(holders);
      }
    });

    it('lets exactly one of 50 concurrent calls take over a lapsed reservation, which then cannot be settled', async () => {
      const [a, b] = await twoHandles();
      const lapsed = await reserved(a, ['m', 'n'], 1_000);
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, (_, index) => (index % 2 === 0 ? a : b).reserve(evidence('n', 'm'), 5_000)),
      );
      expect(outcomes.filter((outcome) => outcome.ok)).toHaveLength(1);
      await expect(b.markInDoubt(lapsed)).rejects.toMatchObject({ code: 'store-failed' });
      await expect(a.commit(lapsed)).rejects.toMatchObject({ code: 'store-failed' });
    });

    it('settles a reservation once when 20 commits of it race through both handles, keeping the first result', async () => {
      const [a, b] = await twoHandles();
      for (let round = 0; round < 5; round += 1) {
        const reservation = await reserved(a, [`c-${round}`, `d-${round}`], 1_000);
        await b.markInDoubt(reservation, { sendingUntil: 2_000 });
        const outcomes = await Promise.allSettled(
          Array.from({ length: 20 }, (_, index) =>
            (index % 2 === 0 ? a : b).commit(reservation, { result: `result-${index}` }),
          ),
        );
        expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
        const winner = outcomes.findIndex((outcome) => outcome.status === 'fulfilled');
        expect(await a.lookup([`c-${round}`, `d-${round}`], 1_000)).toMatchObject([
          { state: 'spent', result: `result-${winner}` },
          { state: 'spent', result: `result-${winner}` },
        ]);
      }
    });

    it('keeps an in-doubt entry held against 50 concurrent calls through both handles, until it is released', async () => {
      const [a, b] = await twoHandles();
      const inDoubt = await reserved(a, ['paid?'], 1_000);
      await a.markInDoubt(inDoubt);
      // Past the lease, before the evidence expires.
      const later = 500_000_000;
      const attempts = () =>
        Promise.all(
          Array.from({ length: 50 }, (_, index) => (index % 2 === 0 ? a : b).reserve(evidence('paid?'), later)),
        );
      expect((await attempts()).filter((outcome) => outcome.ok)).toHaveLength(0);
      await b.release(inDoubt);
      expect((await attempts()).filter((outcome) => outcome.ok)).toHaveLength(1);
    });

    it('evicts nothing when concurrent calls through both handles meet a full store', async () => {
      const [a, b] = await twoHandles({ capacity: 4 });
      await reserved(a, ['h1', 'h2'], 1_000);
      await reserved(b, ['h3', 'h4'], 1_000);
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, (_, index) => (index % 2 === 0 ? a : b).reserve(evidence(`new-${index}`), 1_000)),
      );
      expect(outcomes.every((outcome) => !outcome.ok && outcome.reason === 'full')).toBe(true);
      expect((await b.lookup(['h1', 'h2', 'h3', 'h4'], 1_000)).map((entry) => entry.id)).toEqual([
        'h1',
        'h2',
        'h3',
        'h4',
      ]);
    });
  });
});

describe.skipIf(!postgresAvailable)('the PostgreSQL evidence store when a purge skips a locked row', () => {
  it('refuses to settle a lapsed reservation that lost one id, and moves none of its others', async () => {
    const url = await createTestDatabase();
    const store = await openPostgresEvidenceStore({ url, capacity: 10, leaseMs: 1_000 });
    stores.push(store);
    const first = await store.reserve(evidence('x', 'y'), 1_000);
    if (!first.ok) throw new Error('reserve failed');
    // Another session holds y's row, so the next reservation's purge skips it and takes x over.
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query(`SELECT 1 FROM spent_evidence WHERE id = 'y' FOR UPDATE`);
      expect((await store.reserve(evidence('x'), 2_000)).ok).toBe(true);
      await other.query('COMMIT');
    } finally {
      await other.end();
    }
    await expect(store.markInDoubt(first.reservation)).rejects.toMatchObject({ code: 'store-failed' });
    await expect(store.commit(first.reservation)).rejects.toMatchObject({ code: 'store-failed' });
    // y is still only a lapsed reservation: free, never in doubt.
    expect(await store.lookup(['x', 'y'], 2_000)).toMatchObject([{ id: 'x', state: 'reserved' }]);
  });
});

describe.skipIf(!postgresAvailable)('the PostgreSQL evidence table', () => {
  it('refuses an unknown state, an empty reservation, a reservation without a lease and a spent entry with one', async () => {
    const url = await createTestDatabase();
    const store = await openPostgresEvidenceStore({ url, capacity: 10 });
    stores.push(store);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const insert = (id: string, state: string, size: number, leaseUntil: number | null) =>
        client.query(
          `INSERT INTO spent_evidence (id, expires_at, state, reservation, reservation_size, lease_until)
           VALUES ($1, 9000, $2, 'r', $3, $4)`,
          [id, state, size, leaseUntil],
        );
      await expect(insert('a', 'lost', 1, null)).rejects.toThrow(/check/);
      await expect(insert('b', 'reserved', 0, 5_000)).rejects.toThrow(/check/);
      await expect(insert('c', 'reserved', 1, null)).rejects.toThrow(/check/);
      await expect(insert('d', 'spent', 1, 5_000)).rejects.toThrow(/check/);
      // In doubt, the lease is the sender's, and optional.
      await insert('e', 'in-doubt', 1, 5_000);
      await insert('g', 'in-doubt', 1, null);
      await insert('f', 'reserved', 1, 5_000);
      await expect(insert('f', 'spent', 1, null)).rejects.toThrow(/duplicate key/);
    } finally {
      await client.end();
    }
  });
});
