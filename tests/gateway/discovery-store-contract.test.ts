import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type DiscoveryLimits,
  type DiscoveryStore,
  memoryDiscoveryStore,
  openPostgresDiscoveryStore,
  openSqliteDiscoveryStore,
} from '../../proxy/index';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';

/** A clock the test moves by hand. */
function manualClock(start = 1_000_000) {
  let now = start;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
  };
}

const opened: DiscoveryStore[] = [];
const folders: string[] = [];
afterEach(async () => {
  await Promise.allSettled(opened.splice(0).map((store) => store.close()));
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function sqliteFile(): string {
  const folder = mkdtempSync(join(tmpdir(), 'discovery-store-'));
  folders.push(folder);
  return join(folder, 'proxy.sqlite');
}

/** Each implementation, opened fresh (an empty file or database) with the given limits. */
const implementations: Record<string, (limits: DiscoveryLimits) => Promise<DiscoveryStore>> = {
  memory: async (limits) => memoryDiscoveryStore(limits),
  sqlite: async (limits) => openSqliteDiscoveryStore({ path: sqliteFile(), ...limits }),
  ...(postgresAvailable && {
    postgres: async (limits) => openPostgresDiscoveryStore({ url: await createTestDatabase(), ...limits }),
  }),
};

/**
 * The implementations several processes can share: a location (a file, a database) and a way to
 * open another, independent handle on it (a connection of its own, a pool of its own).
 */
const shared: Record<
  string,
  { location(): Promise<string>; open(location: string, limits?: DiscoveryLimits): Promise<DiscoveryStore> }
> = {
  sqlite: {
    location: async () => sqliteFile(),
    open: async (path, limits) => openSqliteDiscoveryStore({ path, ...limits }),
  },
  ...(postgresAvailable && {
    postgres: { location: createTestDatabase, open: (url, limits) => openPostgresDiscoveryStore({ url, ...limits }) },
  }),
};

it.skipIf(postgresAvailable)(`the PostgreSQL discovery store is skipped: ${postgresUnavailable}`, () => {});

describe.each(Object.entries(implementations))('the %s discovery store', (_name, open) => {
  const store = async (limits: DiscoveryLimits = {}) => {
    const created = await open(limits);
    opened.push(created);
    return created;
  };

  it('holds what a scope discovered, and nothing for other names or scopes', async () => {
    const discovery = await store();
    await discovery.remember('scope-a', ['files__read', 'github__search']);
    expect(await discovery.has('scope-a', 'files__read')).toBe(true);
    expect(await discovery.has('scope-a', 'github__search')).toBe(true);
    expect(await discovery.has('scope-a', 'files__write')).toBe(false);
    expect(await discovery.has('scope-b', 'files__read')).toBe(false);
    expect(await discovery.live('scope-a')).toBe(true);
    expect(await discovery.live('scope-b')).toBe(false);
  });

  it('adds a later search to the same scope', async () => {
    const discovery = await store();
    await discovery.remember('scope', ['a']);
    await discovery.remember('scope', ['b']);
    expect(await discovery.has('scope', 'a')).toBe(true);
    expect(await discovery.has('scope', 'b')).toBe(true);
  });

  it('forgets a scope at its time limit, and a later search does not bring its old names back', async () => {
    const clock = manualClock();
    const discovery = await store({ ttlMs: 1_000, now: clock.now });
    await discovery.remember('scope', ['old']);
    clock.advance(999);
    expect(await discovery.has('scope', 'old')).toBe(true);
    clock.advance(1);
    expect(await discovery.has('scope', 'old')).toBe(false);
    expect(await discovery.live('scope')).toBe(false);
    await discovery.remember('scope', ['new']);
    expect(await discovery.has('scope', 'new')).toBe(true);
    expect(await discovery.has('scope', 'old')).toBe(false);
  });

  it('restarts the time limit on a search, never on a check', async () => {
    const clock = manualClock();
    const discovery = await store({ ttlMs: 1_000, now: clock.now });
    await discovery.remember('searched', ['tool']);
    await discovery.remember('checked', ['tool']);
    clock.advance(600);
    await discovery.remember('searched', ['other']);
    expect(await discovery.has('checked', 'tool')).toBe(true);
    clock.advance(600);
    expect(await discovery.has('searched', 'tool')).toBe(true);
    expect(await discovery.has('checked', 'tool')).toBe(false);
  });

  it('forgets the oldest names beyond the bound, and re-adding a name makes it new', async () => {
    const discovery = await store({ maxNamesPerScope: 2 });
    await discovery.remember('scope', ['a', 'b']);
    await discovery.remember('scope', ['a']);
    await discovery.remember('scope', ['c']);
    expect(await discovery.has('scope', 'b')).toBe(false);
    expect(await discovery.has('scope', 'a')).toBe(true);
    expect(await discovery.has('scope', 'c')).toBe(true);
  });

  it('forgets the least recently searched scope beyond the bound', async () => {
    const clock = manualClock();
    const discovery = await store({ maxScopes: 2, now: clock.now });
    await discovery.remember('first', ['tool']);
    clock.advance(1);
    await discovery.remember('second', ['tool']);
    clock.advance(1);
    await discovery.remember('first', ['tool']);
    clock.advance(1);
    await discovery.remember('third', ['tool']);
    expect(await discovery.has('second', 'tool')).toBe(false);
    expect(await discovery.has('first', 'tool')).toBe(true);
    expect(await discovery.has('third', 'tool')).toBe(true);
  });

  it('keeps names that only differ in case or by a trailing space apart', async () => {
    const discovery = await store();
    await discovery.remember('scope', ['Files__read']);
    expect(await discovery.has('scope', 'files__read')).toBe(false);
    expect(await discovery.has('scope', 'Files__read ')).toBe(false);
  });
});

describe.each(Object.entries(shared))('the %s discovery store shared by two instances', (_name, kind) => {
  const two = async (limits: DiscoveryLimits = {}) => {
    const location = await kind.location();
    const pair = [await kind.open(location, limits), await kind.open(location, limits)] as const;
    opened.push(...pair);
    return pair;
  };

  it('answers through one handle what a search recorded through another, under concurrent writers', async () => {
    const [writer, reader] = await two();
    await Promise.all(
      Array.from({ length: 50 }, (_, index) =>
        (index % 2 === 0 ? writer : reader).remember(`scope-${index % 5}`, [`tool-${index}`]),
      ),
    );
    for (let index = 0; index < 50; index += 1) {
      const other = index % 2 === 0 ? reader : writer;
      expect(await other.has(`scope-${index % 5}`, `tool-${index}`)).toBe(true);
    }
  });

  it('keeps one scope within its bound when two instances record into it at once', async () => {
    const [first, second] = await two({ maxNamesPerScope: 10 });
    await Promise.all(
      Array.from({ length: 40 }, (_, index) =>
        (index % 2 === 0 ? first : second).remember('scope', [`tool-${index}`, `extra-${index}`]),
      ),
    );
    let kept = 0;
    for (let index = 0; index < 40; index += 1) {
      for (const name of [`tool-${index}`, `extra-${index}`]) if (await first.has('scope', name)) kept += 1;
    }
    expect(kept).toBe(10);
  });

  it('forgets an expired scope for both instances even when both search it again at once', async () => {
    const clock = manualClock();
    const [first, second] = await two({ ttlMs: 1_000, now: clock.now });
    await first.remember('scope', ['old']);
    clock.advance(1_000);
    await Promise.all([first.remember('scope', ['new-1']), second.remember('scope', ['new-2'])]);
    expect(await second.has('scope', 'old')).toBe(false);
    expect(await first.has('scope', 'new-1')).toBe(true);
    expect(await first.has('scope', 'new-2')).toBe(true);
  });

  it('survives a burst of new scopes beyond the bound through two instances, and the next search restores the bound', async () => {
    const clock = manualClock();
    const [first, second] = await two({ maxScopes: 5, now: clock.now });
    const burst = await Promise.allSettled(
      Array.from({ length: 60 }, (_, index) => (index % 2 === 0 ? first : second).remember(`burst-${index}`, ['tool'])),
    );
    expect(burst.filter((outcome) => outcome.status === 'rejected')).toEqual([]);
    clock.advance(1);
    await first.remember('last', ['tool']);
    let live = 0;
    for (let index = 0; index < 60; index += 1) if (await second.live(`burst-${index}`)) live += 1;
    expect(await second.has('last', 'tool')).toBe(true);
    expect(live).toBe(4);
  });

  it('never deadlocks when instances whose clocks differ purge and evict at once, and keeps the bound', async () => {
    // Scopes that only the later clock finds expired lie before those both find expired. Without
    // one housekeeper at a time, the later instance's purge holds the first kind and waits on the
    // second, which the earlier one's purge holds while its eviction waits on the first kind.
    for (let round = 0; round < 4; round += 1) {
      let setupAt = 0;
      const location = await kind.location();
      const limits = { ttlMs: 1_000, maxScopes: 8 };
      const setup = await kind.open(location, { ttlMs: limits.ttlMs, now: () => setupAt });
      opened.push(setup);
      for (let index = 0; index < 20; index += 1) {
        setupAt = 30;
        await setup.remember(`late-${index}`, ['tool']);
      }
      for (let index = 0; index < 20; index += 1) {
        setupAt = 10;
        await setup.remember(`early-${index}`, ['tool']);
      }
      const earlier = await kind.open(location, { ...limits, now: () => 1_020 });
      const later = await kind.open(location, { ...limits, now: () => 1_040 });
      opened.push(earlier, later);
      const searches = await Promise.allSettled(
        Array.from({ length: 30 }, (_, index) =>
          (index % 2 === 0 ? earlier : later).remember(`new-${index}`, ['tool']),
        ),
      );
      expect(searches.filter((outcome) => outcome.status === 'rejected')).toEqual([]);
      // The next search on its own keeps house: the bound holds again, its own scope the newest.
      const next = await kind.open(location, { ...limits, now: () => 1_050 });
      opened.push(next);
      await next.remember('last', ['tool']);
      let live = 0;
      for (let index = 0; index < 30; index += 1) if (await next.live(`new-${index}`)) live += 1;
      expect(await next.has('last', 'tool')).toBe(true);
      expect(live).toBe(limits.maxScopes - 1);
    }
  });

  it('keeps what was discovered across a reopen', async () => {
    const location = await kind.location();
    const first = await kind.open(location);
    await first.remember('scope', ['tool']);
    await first.close();
    const second = await kind.open(location);
    opened.push(second);
    expect(await second.has('scope', 'tool')).toBe(true);
  });
});

describe.skipIf(!postgresAvailable)('the PostgreSQL discovery store while another search keeps house', () => {
  it('starts an expired scope found again empty, though this search may not purge the others', async () => {
    const url = await createTestDatabase();
    const clock = manualClock();
    const store = await openPostgresDiscoveryStore({ url, ttlMs: 1_000, now: clock.now });
    opened.push(store);
    await store.remember('scope', ['old']);
    // Another session holds the housekeeping lock ("emcp-dhk") for as long as this test searches.
    const housekeeper = new pg.Client({ connectionString: url });
    await housekeeper.connect();
    try {
      await housekeeper.query('BEGIN');
      await housekeeper.query('SELECT pg_advisory_xact_lock(7308607103741225067)');
      clock.advance(1_000);
      await store.remember('scope', ['new']);
      expect(await store.has('scope', 'old')).toBe(false);
      expect(await store.has('scope', 'new')).toBe(true);
    } finally {
      await housekeeper.query('ROLLBACK');
      await housekeeper.end();
    }
  });
});
