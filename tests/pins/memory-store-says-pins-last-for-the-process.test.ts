/**
 * docs/pinning.md: pins are never silently memory-only. With `--store memory:` the proxy still
 * pins and holds, says at start that its pins end with the process, and writes no store file.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { PinnedProxy } from './fixtures/pinned-proxy';
import { startShopProxy } from './fixtures/start-shop-proxy';

const proxies: PinnedProxy[] = [];
afterEach(async () => {
  await Promise.allSettled(proxies.splice(0).map((proxy) => proxy.close()));
});

it('a memory: store says pins live for the process only, and still holds a change', async () => {
  const proxy = await startShopProxy([{ name: 'lookup', description: 'Looks up an order by its number' }], {
    flags: ['--store', 'memory:'],
  });
  proxies.push(proxy);
  expect(proxy.lines).toContain(
    '[extensible-mcp] pins: memory: tool pins live for this process only; every start trusts the first listings again',
  );
  await proxy.waitFor(/server "shop": first listing, 1 tools pinned/);
  const before = proxy.lines.length;
  proxy.relist([{ name: 'lookup', description: 'Looks up an order, and more' }]);
  await proxy.waitFor(/server "shop": tool "lookup" held \(changed: \/description;/, before);
  expect(existsSync(join(proxy.folder, 'proxy.sqlite'))).toBe(false);
});
