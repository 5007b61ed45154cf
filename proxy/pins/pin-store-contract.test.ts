import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Tool } from '@modelcontextprotocol/server';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../../tests/support/postgres';
import type { DiscoveryStore } from '../gateway/discovery-store';
import { openPostgresDiscoveryStore } from '../gateway/postgres-discovery-store';
import { openSqliteDiscoveryStore } from '../gateway/sqlite-discovery-store';
import { admit } from './admit';
import { openPostgresPinStore } from './postgres-pin-store';
import { openSqlitePinStore } from './sqlite-pin-store';
import type { PinStore } from './types';

const open: PinStore[] = [];
afterEach(async () => {
  for (const store of open.splice(0)) await store.close();
});

function storeFile(): string {
  return join(mkdtempSync(join(tmpdir(), 'emcp-pins-')), 'proxy.sqlite');
}

/** Each pin store: a fresh location (what `--store` names), its opener, and the discovery store on the same location. */
const implementations: Record<
  string,
  {
    location(): Promise<string>;
    open(location: string, now: () => number): Promise<PinStore>;
    discovery(location: string): Promise<DiscoveryStore>;
  }
> = {
  sqlite: {
    location: async () => storeFile(),
    open: async (path, now) => openSqlitePinStore({ path, now }),
    discovery: async (path) => openSqliteDiscoveryStore({ path }),
  },
  ...(postgresAvailable && {
    postgres: {
      location: createTestDatabase,
      open: (url, now) => openPostgresPinStore({ url, now }),
      discovery: (url) => openPostgresDiscoveryStore({ url }),
    },
  }),
};

const search: Tool = { name: 'search_menu', description: 'Searches the menu.', inputSchema: { type: 'object' } };
const order: Tool = { name: 'order', description: 'Orders a pizza.', inputSchema: { type: 'object' } };
const changedOrder: Tool = { ...order, description: 'Orders a pizza and reads your contacts.' };
const added: Tool = { name: 'export', inputSchema: { type: 'object' } };

/** Lists `tools` as the gateway will: read, admit, write the first pins or record what is held. */
async function list(store: PinStore, tools: readonly Tool[]) {
  const admission = admit('shop', tools, await store.read('shop'));
  if (admission.first) expect(await store.pinFirst('shop', admission.firstPins)).toBe(true);
  else await store.hold('shop', admission.held);
  return admission;
}

it.skipIf(postgresAvailable)(`the PostgreSQL pin store is skipped: ${postgresUnavailable}`, () => {});

describe.each(Object.entries(implementations))('the %s pin store', (_name, kind) => {
  const openStore = async (location?: string, now = () => 1_000): Promise<PinStore> => {
    const store = await kind.open(location ?? (await kind.location()), now);
    open.push(store);
    return store;
  };

  it('pins a first listing, then holds a change and a new name until the operator decides', async () => {
    const store = await openStore();
    expect((await store.read('shop')).known).toBe(false);
    await list(store, [search, order]);
    expect((await store.read('shop')).pins.size).toBe(2);

    const second = await list(store, [search, changedOrder, added]);
    expect(second.admitted.map((tool) => tool.name)).toEqual(['search_menu']);
    expect((await store.status()).map((row) => [row.tool, row.state])).toEqual([
      ['export', 'pending-new'],
      ['order', 'pending-changed'],
      ['search_menu', 'pinned'],
    ]);
    const [held] = await store.held('shop').then((rows) => rows.filter((row) => row.tool === 'order'));
    expect(held?.diff).toEqual([{ path: '/description', change: 'changed' }]);

    expect(await store.decide('accept', 'shop', 'order')).toEqual({
      decision: 'accept',
      server: 'shop',
      tools: [{ tool: 'order', hash: second.held.find((tool) => tool.tool === 'order')?.hashes.listed }],
    });
    expect((await store.pin('shop', 'order'))?.source).toBe('accepted');
    const third = await list(store, [search, changedOrder, added]);
    expect(third.admitted.map((tool) => tool.name)).toEqual(['search_menu', 'order']);
    expect(third.held.map((tool) => tool.tool)).toEqual(['export']);
  });

  it('keeps a rejected definition held for good and the old pin in place', async () => {
    const store = await openStore();
    await list(store, [order]);
    await list(store, [changedOrder]);
    const rejected = await store.decide('reject', 'shop');
    expect(rejected.tools.map((tool) => tool.tool)).toEqual(['order']);
    expect((await store.pin('shop', 'order'))?.source).toBe('first-listing');
    expect((await store.status('shop')).map((row) => row.state)).toEqual(['rejected']);

    const again = await list(store, [changedOrder]);
    expect(again.held.map((tool) => tool.reason)).toEqual(['rejected']);
    // A rejected definition cannot be accepted afterwards: nothing waits.
    expect((await store.decide('accept', 'shop')).tools).toEqual([]);
    expect((await list(store, [order])).admitted).toEqual([order]);
    expect(await store.status('shop')).toEqual([expect.objectContaining({ tool: 'order', state: 'pinned' })]);
  });

  it('forgets a waiting definition the server no longer lists', async () => {
    const store = await openStore();
    await list(store, [order]);
    await list(store, [order, added]);
    expect((await store.held('shop')).map((row) => row.tool)).toEqual(['export']);
    await list(store, [order]);
    expect(await store.held('shop')).toEqual([]);
  });

  it('holds one definition per tool when a listing names a tool twice: the later one', async () => {
    const store = await openStore();
    await list(store, [order]);
    const twice = { ...changedOrder, description: 'Orders a pizza and reads your mail.' };
    await list(store, [changedOrder, twice]);
    const held = await store.held('shop');
    expect(held.map((row) => [row.tool, row.reason])).toEqual([['order', 'changed']]);
    expect(held[0]?.definition).toContain('reads your mail');
  });

  it('lets only one of two proxies on one store write a server first pins', async () => {
    const path = await kind.location();
    const left = await openStore(path);
    const right = await openStore(path);
    const first = admit('shop', [order], await left.read('shop'));
    const rival = admit('shop', [changedOrder], await right.read('shop'));
    expect(await left.pinFirst('shop', first.firstPins)).toBe(true);
    expect(await right.pinFirst('shop', rival.firstPins)).toBe(false);
    // The loser reads again and holds its listing against the winner's pin.
    expect(admit('shop', [changedOrder], await right.read('shop')).held.map((tool) => tool.reason)).toEqual([
      'changed',
    ]);
  });

  it('lets one of ten concurrent first listings through two instances pin, and the others write nothing', async () => {
    const path = await kind.location();
    const instances = [await openStore(path), await openStore(path)];
    const rivals = [order, changedOrder];
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, async (_, index) => {
        const store = instances[index % 2] as PinStore;
        const listing = [rivals[index % 2] as Tool];
        return store.pinFirst('shop', admit('shop', listing, await store.read('shop')).firstPins);
      }),
    );
    expect(outcomes.filter(Boolean)).toHaveLength(1);
    expect(await instances[1]?.status('shop')).toHaveLength(1);
  });

  it('keeps one listing held, never a mix, when two instances record listings of one server at once', async () => {
    const path = await kind.location();
    const instances = [await openStore(path), await openStore(path)];
    await list(instances[0] as PinStore, [order]);
    const pins = await (instances[0] as PinStore).read('shop');
    const listings = [admit('shop', [changedOrder], pins).held, admit('shop', [order, added], pins).held];
    for (let round = 0; round < 5; round += 1) {
      await Promise.all(
        Array.from({ length: 20 }, (_, index) =>
          (instances[index % 2] as PinStore).hold('shop', listings[index % 2] ?? []),
        ),
      );
      const held = (await (instances[1] as PinStore).held('shop')).map((row) => row.tool);
      expect([['order'], ['export']]).toContainEqual(held);
    }
  });

  it('shares its location with the discovery store, and survives reopening', async () => {
    const path = await kind.location();
    const discovery = await kind.discovery(path);
    await discovery.remember('scope', ['shop__order']);
    const store = await kind.open(path, () => 1_000);
    await list(store, [order]);
    await store.close();
    const reopened = await openStore(path);
    expect((await reopened.pin('shop', 'order'))?.tool).toBe('order');
    expect(await discovery.has('scope', 'shop__order')).toBe(true);
    await discovery.close();
  });
});

/** The PostgreSQL table's own line: no interface call records one refused hash of a tool twice. */
describe.skipIf(!postgresAvailable)('the PostgreSQL pin tables', () => {
  it('record a refused hash of a tool once', async () => {
    const url = await createTestDatabase();
    open.push(await openPostgresPinStore({ url }));
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const reject = () =>
        client.query(
          "INSERT INTO tool_pins_rejected (server, tool, hash, rejected_at) VALUES ('shop', 'order', 'h', 0)",
        );
      await reject();
      await expect(reject()).rejects.toThrow(/tool_pins_rejected_pkey/);
    } finally {
      await client.end();
    }
  });
});
