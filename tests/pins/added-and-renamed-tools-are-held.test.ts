/**
 * Issue 30 acceptance (SPEC §3.13): pinning by hash alone is defeated by a rename, so a name new
 * to a server that has pins is held like a change. The same stdio server adds a tool and renames
 * another after its first admission: both are held, and the unchanged tool keeps working. A
 * server the store has never seen, added by a SIGHUP reload, is pinned on its first listing, not
 * held, and what was held stays held across that reload.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import {
  type PinnedProxy,
  runPins,
  scratchFolder,
  startPinnedProxy,
  stdioServer,
  textOf,
  writeListing,
} from './fixtures/pinned-proxy';

const proxies: PinnedProxy[] = [];
afterEach(async () => {
  await Promise.allSettled(proxies.splice(0).map((proxy) => proxy.close()));
});

it('an added and a renamed tool are both held; a server never seen before is pinned, not held', async () => {
  const folder = scratchFolder();
  const shop = join(folder, 'shop.json');
  writeListing(shop, [
    { name: 'lookup', description: 'Looks up an order by its number' },
    { name: 'echo', description: 'Echoes the message back' },
  ]);
  const config = join(folder, 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers: { shop: stdioServer(shop) } }));
  const proxy = await startPinnedProxy(config);
  proxies.push(proxy);
  await proxy.waitFor(/server "shop": first listing, 2 tools pinned/);

  // `echo` is renamed to `say` (same description) and `refund` is added.
  const before = proxy.lines.length;
  writeListing(shop, [
    { name: 'lookup', description: 'Looks up an order by its number' },
    { name: 'say', description: 'Echoes the message back' },
    { name: 'refund', description: 'Refunds an order to the card it was paid with' },
  ]);
  await proxy.waitFor(/server "shop": tool "say" held \(new; listed [0-9a-f]{12}\)/, before);
  await proxy.waitFor(/server "shop": tool "refund" held \(new; listed [0-9a-f]{12}\)/, before);
  await proxy.waitFor(/server "shop": tool list changed, re-indexed/, before);

  const names = async (query: string) => (await proxy.search(query)).map((hit) => hit.name);
  expect(await names('echo the message back')).not.toContain('shop__say');
  expect(await names('refund an order to the card')).not.toContain('shop__refund');
  for (const tool of ['say', 'refund']) {
    const refused = await proxy.call(`shop__${tool}`, { message: 'hi' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toBe(
      `"shop__${tool}" is new to server "shop" and is held for the operator's review (extensible-mcp pins diff shop ${tool}).`,
    );
  }
  expect(textOf(await proxy.call('shop__lookup', { message: '7' }))).toBe('lookup ran: 7');
  const listed = await runPins(config, ['list']);
  expect(listed.stdout).toMatch(/^shop refund pending-new listed [0-9a-f]{12}$/m);
  expect(listed.stdout).toMatch(/^shop say pending-new listed [0-9a-f]{12}$/m);
  // accept needs a tool or --all: accepting everything is never the default.
  expect((await runPins(config, ['accept', 'shop'])).code).toBe(2);

  // A server the store has never seen, added by a reload: pinned on its first listing, not held.
  const billing = join(folder, 'billing.json');
  writeListing(billing, [
    { name: 'invoice', description: 'Creates an invoice for a customer' },
    { name: 'statement', description: 'Prints the monthly statement of an account' },
  ]);
  writeFileSync(config, JSON.stringify({ mcpServers: { shop: stdioServer(shop), billing: stdioServer(billing) } }));
  const reloading = proxy.lines.length;
  process.kill(proxy.pid, 'SIGHUP');
  await proxy.waitFor(/^\[extensible-mcp\] reloaded:/, reloading);
  expect(proxy.lines.slice(reloading)).toContain('[extensible-mcp] server "billing": first listing, 2 tools pinned');
  expect(proxy.lines.slice(reloading).some((line) => /"billing".*held/.test(line))).toBe(false);
  expect(await names('create an invoice for a customer')).toContain('billing__invoice');
  expect(textOf(await proxy.call('billing__invoice', { message: 'acme' }))).toBe('invoice ran: acme');
  // The reload checked shop's last listing again: what was held is still held.
  expect(proxy.lines.slice(reloading)).toEqual(
    expect.arrayContaining([expect.stringMatching(/tool "say" held \(new/)]),
  );
  expect((await proxy.call('shop__say', { message: 'hi' })).isError).toBe(true);
});
