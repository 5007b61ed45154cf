import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Tool } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteDiscoveryStore } from '../gateway/sqlite-discovery-store';
import { admit } from './admit';
import { openSqlitePinStore } from './sqlite-pin-store';
import type { PinStore } from './types';

const open: PinStore[] = [];
afterEach(async () => {
  for (const store of open.splice(0)) await store.close();
});

function storeFile(): string {
  return join(mkdtempSync(join(tmpdir(), 'emcp-pins-')), 'proxy.sqlite');
}

function openStore(path = storeFile(), now = () => 1_000): PinStore {
  const store = openSqlitePinStore({ path, now });
  open.push(store);
  return store;
}

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

describe('openSqlitePinStore', () => {
  it('pins a first listing, then holds a change and a new name until the operator decides', async () => {
    const store = openStore();
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
    const store = openStore();
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
    const store = openStore();
    await list(store, [order]);
    await list(store, [order, added]);
    expect((await store.held('shop')).map((row) => row.tool)).toEqual(['export']);
    await list(store, [order]);
    expect(await store.held('shop')).toEqual([]);
  });

  it('lets only one of two proxies on one file write a server first pins', async () => {
    const path = storeFile();
    const left = openStore(path);
    const right = openStore(path);
    const first = admit('shop', [order], await left.read('shop'));
    const rival = admit('shop', [changedOrder], await right.read('shop'));
    expect(await left.pinFirst('shop', first.firstPins)).toBe(true);
    expect(await right.pinFirst('shop', rival.firstPins)).toBe(false);
    // The loser reads again and holds its listing against the winner's pin.
    expect(admit('shop', [changedOrder], await right.read('shop')).held.map((tool) => tool.reason)).toEqual([
      'changed',
    ]);
  });

  it('shares the file with the discovery store, and survives reopening', async () => {
    const path = storeFile();
    const discovery = openSqliteDiscoveryStore({ path });
    await discovery.remember('scope', ['shop__order']);
    const store = openStore(path);
    await list(store, [order]);
    await store.close();
    const reopened = openStore(path);
    expect((await reopened.pin('shop', 'order'))?.tool).toBe('order');
    expect(await discovery.has('scope', 'shop__order')).toBe(true);
    await discovery.close();
  });
});
