/**
 * One contract for every single-use ledger (SPEC §3.12, §10.6): an id is spent once, and among
 * concurrent spends of one id through several instances on one store, exactly one succeeds.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { memorySpentLedger, openPostgresSpentLedger, openSqliteSpentLedger, type SpentLedger } from '../../proxy/index';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';

const opened: SpentLedger[] = [];
const folders: string[] = [];
afterEach(async () => {
  await Promise.allSettled(opened.splice(0).map((ledger) => ledger.close()));
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function sqliteFile(): string {
  const folder = mkdtempSync(join(tmpdir(), 'spent-ledger-'));
  folders.push(folder);
  return join(folder, 'proxy.sqlite');
}

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

/** Each implementation: a fresh location, and a way to open an independent handle on it. */
const implementations: Record<
  string,
  { location(): Promise<string>; open(location: string, now: () => number): Promise<SpentLedger> }
> = {
  memory: { location: async () => '', open: async (_location, now) => memorySpentLedger(now) },
  sqlite: { location: async () => sqliteFile(), open: async (path, now) => openSqliteSpentLedger(path, now) },
  ...(postgresAvailable && {
    postgres: { location: createTestDatabase, open: (url, now) => openPostgresSpentLedger(url, now) },
  }),
};

it.skipIf(postgresAvailable)(`the PostgreSQL spent ledger is skipped: ${postgresUnavailable}`, () => {});

describe.each(Object.entries(implementations))('the %s spent ledger', (name, kind) => {
  const ledger = async (now: () => number = Date.now, location?: string) => {
    const created = await kind.open(location ?? (await kind.location()), now);
    opened.push(created);
    return created;
  };

  it('spends an id once, and other ids independently', async () => {
    const clock = manualClock();
    const spent = await ledger(clock.now);
    expect(await spent.spend('id-1', clock.now() + 60_000)).toBe(true);
    expect(await spent.spend('id-1', clock.now() + 60_000)).toBe(false);
    expect(await spent.spend('id-2', clock.now() + 60_000)).toBe(true);
    expect(await spent.spend('ID-1', clock.now() + 60_000)).toBe(true);
  });

  it('refuses a spent id until its expiry, even with a later expiry offered', async () => {
    const clock = manualClock();
    const spent = await ledger(clock.now);
    expect(await spent.spend('id', clock.now() + 1_000)).toBe(true);
    clock.advance(999);
    expect(await spent.spend('id', clock.now() + 60_000)).toBe(false);
  });

  it('spends an id once among twenty concurrent spends', async () => {
    const spent = await ledger();
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => spent.spend('same', Date.now() + 60_000)));
    expect(outcomes.filter(Boolean)).toHaveLength(1);
  });

  it.skipIf(name === 'memory')('spends an id once among twenty concurrent spends through two instances', async () => {
    const location = await kind.location();
    const instances = [await ledger(Date.now, location), await ledger(Date.now, location)];
    for (let round = 0; round < 5; round += 1) {
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, (_, index) =>
          (instances[index % 2] as SpentLedger).spend(`shared-${round}`, Date.now() + 60_000),
        ),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(1);
    }
  });

  it.skipIf(name === 'memory')('keeps what was spent across a reopen', async () => {
    const location = await kind.location();
    const first = await kind.open(location, Date.now);
    expect(await first.spend('id', Date.now() + 60_000)).toBe(true);
    await first.close();
    const second = await ledger(Date.now, location);
    expect(await second.spend('id', Date.now() + 60_000)).toBe(false);
  });
});

describe.skipIf(!postgresAvailable)('the PostgreSQL spent ledger under contention', () => {
  it('lets one of many spends of one id through several pools win, every round', async () => {
    const url = await createTestDatabase();
    const pools = await Promise.all(Array.from({ length: 4 }, () => openPostgresSpentLedger(url)));
    opened.push(...pools);
    for (let round = 0; round < 10; round += 1) {
      const outcomes = await Promise.all(
        Array.from({ length: 40 }, (_, index) =>
          (pools[index % pools.length] as SpentLedger).spend(`contended-${round}`, Date.now() + 60_000),
        ),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(1);
    }
  });
});
