/**
 * One contract for every turn-lease store (docs/scale-out.md, turn leases): memory, SQLite and
 * PostgreSQL. A live lease is one owner's; an expired one is anyone's, and of concurrent claims
 * through two handles exactly one gets it; a resume point survives its owner's death and is gone
 * with a release.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openPostgresPool } from '../../proxy/index';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../../tests/support/postgres';
import { applyMigrations } from '../apply-migrations';
import { createPostgresTurnLeaseStore, postgresTurnLeaseMigrations } from './postgres-turn-leases';
import {
  createMemoryTurnLeaseStore,
  createSqliteTurnLeaseStore,
  type TurnLeaseStore,
  turnLeaseMigrations,
} from './turn-leases';

const closers: (() => Promise<void>)[] = [];
const folders: string[] = [];
afterEach(async () => {
  await Promise.allSettled(closers.splice(0).map((close) => close()));
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

/** Each implementation: a fresh location, and a way to open an independent handle on it. */
const implementations: Record<
  string,
  { shared: boolean; location(): Promise<string>; open(location: string): Promise<TurnLeaseStore> }
> = {
  memory: { shared: false, location: async () => '', open: async () => createMemoryTurnLeaseStore() },
  sqlite: {
    shared: true,
    location: async () => {
      const folder = await mkdtemp(join(tmpdir(), 'turn-leases-'));
      folders.push(folder);
      return join(folder, 'household.sqlite');
    },
    open: async (path) => {
      const database = new Database(path);
      closers.push(async () => {
        database.close();
      });
      database.pragma('journal_mode = WAL');
      database.pragma('busy_timeout = 5000');
      applyMigrations(database, { 'turn-leases': turnLeaseMigrations });
      return createSqliteTurnLeaseStore(database);
    },
  },
  ...(postgresAvailable && {
    postgres: {
      shared: true,
      location: createTestDatabase,
      open: async (url: string) => {
        const pool = await openPostgresPool({
          url,
          migrations: { 'turn-leases': postgresTurnLeaseMigrations },
          what: 'turn leases',
        });
        closers.push(() => pool.end());
        return createPostgresTurnLeaseStore(pool);
      },
    },
  }),
};

it.skipIf(postgresAvailable)(`the PostgreSQL turn-lease store is skipped: ${postgresUnavailable}`, () => {});

const ttlMs = 10_000;
const order = (approvalId: string) => ({ kind: 'order' as const, approvalId });

describe.each(Object.entries(implementations))('the %s turn-lease store', (_name, kind) => {
  const open = async () => kind.open(await kind.location());

  it('gives a free lease, keeps it its owner’s while live, and frees it at expiry or release', async () => {
    const store = await open();
    const now = 1_000_000;
    expect(await store.claim({ sessionId: 's', owner: 'a', now, ttlMs })).toEqual({
      sessionId: 's',
      owner: 'a',
      expiresAt: now + ttlMs,
    });
    expect(await store.claim({ sessionId: 's', owner: 'b', now: now + ttlMs - 1, ttlMs })).toBeUndefined();
    expect(await store.renew({ sessionId: 's', owner: 'b', now, ttlMs })).toBe(false);
    expect(await store.renew({ sessionId: 's', owner: 'a', now: now + 5_000, ttlMs })).toBe(true);
    // The owner's own claim of its live lease takes it again, to a new expiry.
    expect((await store.claim({ sessionId: 's', owner: 'a', now: now + 5_000, ttlMs }))?.expiresAt).toBe(
      now + 5_000 + ttlMs,
    );
    // Renewed: still a's one millisecond after the first expiry.
    expect(await store.claim({ sessionId: 's', owner: 'b', now: now + ttlMs + 1, ttlMs })).toBeUndefined();
    // Expired: b takes it, and a's renewal now fails (its turn must stop).
    const taken = await store.claim({ sessionId: 's', owner: 'b', now: now + 5_000 + ttlMs, ttlMs });
    expect(taken?.owner).toBe('b');
    expect(await store.renew({ sessionId: 's', owner: 'a', now: now + 5_000 + ttlMs, ttlMs })).toBe(false);
    await store.release('s', 'a');
    expect(await store.claim({ sessionId: 's', owner: 'c', now: now + 5_001 + ttlMs, ttlMs })).toBeUndefined();
    await store.release('s', 'b');
    expect((await store.claim({ sessionId: 's', owner: 'c', now: now + 5_001 + ttlMs, ttlMs }))?.owner).toBe('c');
  });

  it('keeps a resume point for a successor only once the lease expired, and drops it with a release', async () => {
    const store = await open();
    const now = 2_000_000;
    await store.claim({ sessionId: 'one', owner: 'a', now, ttlMs });
    await store.claim({ sessionId: 'two', owner: 'a', now, ttlMs });
    await store.claim({ sessionId: 'idle', owner: 'a', now, ttlMs });
    expect(await store.mark({ sessionId: 'one', owner: 'a', resume: order('ap-1') })).toBe(true);
    expect(await store.mark({ sessionId: 'two', owner: 'a', resume: order('ap-2') })).toBe(true);
    expect(await store.mark({ sessionId: 'one', owner: 'b', resume: null })).toBe(false);
    expect(await store.orphans(now + ttlMs - 1, 10)).toEqual([]);
    // Expired with a resume point: orphans, in expiry order; the idle one (no resume point) is not.
    await store.renew({ sessionId: 'two', owner: 'a', now: now + 1, ttlMs });
    expect((await store.orphans(now + ttlMs + 1, 10)).map((lease) => [lease.sessionId, lease.resume])).toEqual([
      ['one', order('ap-1')],
      ['two', order('ap-2')],
    ]);
    expect(await store.orphans(now + ttlMs + 1, 1)).toHaveLength(1);
    // The successor's claim carries the point; clearing it ends the orphan.
    const taken = await store.claim({ sessionId: 'one', owner: 'b', now: now + ttlMs, ttlMs });
    expect(taken).toEqual({ sessionId: 'one', owner: 'b', expiresAt: now + 2 * ttlMs, resume: order('ap-1') });
    expect(await store.mark({ sessionId: 'one', owner: 'b', resume: null })).toBe(true);
    await store.release('two', 'a');
    expect(await store.orphans(now + 3 * ttlMs, 10)).toEqual([]);
  });

  it.runIf(kind.shared)(
    'lets exactly one of 40 concurrent claims of an expired lease through two handles take it, every round',
    async () => {
      const location = await kind.location();
      const [first, second] = [await kind.open(location), await kind.open(location)];
      const stores = [first, second];
      let now = 3_000_000;
      await first.claim({ sessionId: 'turn', owner: 'dead', now, ttlMs });
      await first.mark({ sessionId: 'turn', owner: 'dead', resume: order('ap') });
      for (let round = 0; round < 5; round++) {
        now += ttlMs;
        const claims = await Promise.all(
          Array.from({ length: 40 }, (_, index) =>
            stores[index % 2]?.claim({ sessionId: 'turn', owner: `o${round}-${index}`, now, ttlMs }),
          ),
        );
        const winners = claims.filter((lease) => lease !== undefined);
        expect(winners).toHaveLength(1);
        // The winner inherits what the dead owner left to resume.
        expect(winners[0]?.resume).toEqual(order('ap'));
      }
    },
  );
});

/** The PostgreSQL table's own line, which the memory store has no twin of. */
describe.skipIf(!postgresAvailable)('the PostgreSQL turn-lease table', () => {
  it('refuses a lease with an empty owner, and holds nothing for it', async () => {
    const postgres = implementations.postgres as (typeof implementations)['sqlite'];
    const store = await postgres.open(await postgres.location());
    await expect(store.claim({ sessionId: 's', owner: '', now: 0, ttlMs })).rejects.toThrow(/turn_leases_owner_check/);
    expect((await store.claim({ sessionId: 's', owner: 'a', now: 0, ttlMs }))?.owner).toBe('a');
  });
});
