/**
 * docs/pinning.md: `pins accept` reaches the running proxy through SIGHUP. A config that no longer
 * loads keeps the running one, but the listings are checked against the store again all the
 * same: the accepted tool becomes callable even while the operator's config edit is broken.
 */
import { writeFileSync } from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { type PinnedProxy, runPins, textOf } from './fixtures/pinned-proxy';
import { startShopProxy } from './fixtures/start-shop-proxy';

const proxies: PinnedProxy[] = [];
afterEach(async () => {
  await Promise.allSettled(proxies.splice(0).map((proxy) => proxy.close()));
});

it('an accepted tool is callable after the SIGHUP even when the config no longer loads', async () => {
  const proxy = await startShopProxy([{ name: 'lookup', description: 'Looks up an order by its number' }]);
  proxies.push(proxy);
  const { config } = proxy;
  await proxy.waitFor(/server "shop": first listing/);
  const before = proxy.lines.length;
  proxy.relist([{ name: 'lookup', description: 'Looks up an order by its number, in detail' }]);
  await proxy.waitFor(/tool "lookup" held \(changed/, before);
  expect((await proxy.call('shop__lookup', { message: '1' })).isError).toBe(true);

  // The operator's config edit is half done: the proxy cannot reload it.
  writeFileSync(config, '{"mcpServers": ');
  const accepting = proxy.lines.length;
  // The pins command needs the config's path only, never its contents.
  expect((await runPins(config, ['accept', 'shop', 'lookup'])).code).toBe(0);
  await proxy.waitFor(/reload failed, still running the previous config/, accepting);
  expect(textOf(await proxy.call('shop__lookup', { message: '2' }))).toMatch(/has not been discovered/);
  expect((await proxy.search('look up an order by its number')).map((hit) => hit.name)).toContain('shop__lookup');
  expect(textOf(await proxy.call('shop__lookup', { message: '2' }))).toBe('lookup ran: 2');
});
