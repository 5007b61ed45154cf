/**
 * docs/pinning.md: pins are never silently memory-only. With `--store memory:` the proxy still
 * pins and holds, says at start that its pins end with the process, and writes no store file.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { type PinnedProxy, scratchFolder, startPinnedProxy, stdioServer, writeListing } from './fixtures/pinned-proxy';

const proxies: PinnedProxy[] = [];
afterEach(async () => {
  await Promise.allSettled(proxies.splice(0).map((proxy) => proxy.close()));
});

it('a memory: store says pins live for the process only, and still holds a change', async () => {
  const folder = scratchFolder();
  const listing = join(folder, 'listing.json');
  writeListing(listing, [{ name: 'lookup', description: 'Looks up an order by its number' }]);
  const config = join(folder, 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers: { shop: stdioServer(listing) } }));
  const proxy = await startPinnedProxy(config, ['--store', 'memory:']);
  proxies.push(proxy);
  expect(proxy.lines).toContain(
    '[extensible-mcp] pins: memory: tool pins live for this process only; every start trusts the first listings again',
  );
  await proxy.waitFor(/server "shop": first listing, 1 tools pinned/);
  const before = proxy.lines.length;
  writeListing(listing, [{ name: 'lookup', description: 'Looks up an order, and more' }]);
  await proxy.waitFor(/server "shop": tool "lookup" held \(changed: \/description;/, before);
  expect(existsSync(join(folder, 'proxy.sqlite'))).toBe(false);
});
