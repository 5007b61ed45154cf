/**
 * Issue 28 with issue 30: two proxy replicas on one PostgreSQL store, each with a config of its
 * own, in front of one HTTP server that changes a tool's description after both admitted it. Both
 * hold the changed tool. The operator accepts it through one replica's config, which signals only
 * that replica's pid file; the other hears the decision from the store and serves the accepted
 * definition too, without a signal or a restart.
 */

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';
import { type ChangingHttpServer, startChangingHttpServer } from './fixtures/changing-http-server';
import type { ListedTool } from './fixtures/changing-server';
import { type PinnedProxy, runPins, scratchFolder, startPinnedProxy, textOf } from './fixtures/pinned-proxy';

const first: readonly ListedTool[] = [{ name: 'lookup', description: 'Looks up an order by its number' }];
const changed: readonly ListedTool[] = [{ name: 'lookup', description: 'Looks up an order by its number, faster' }];

const proxies: PinnedProxy[] = [];
const servers: ChangingHttpServer[] = [];
afterEach(async () => {
  await Promise.allSettled(proxies.splice(0).map((proxy) => proxy.close()));
  await Promise.allSettled(servers.splice(0).map((server) => server.close()));
});

it.skipIf(postgresAvailable)(`pins across replicas are skipped: ${postgresUnavailable}`, () => {});

describe.skipIf(!postgresAvailable)('an operator decision on a PostgreSQL pin store', () => {
  it('reaches every replica: accepted through one config, the other serves the accepted definition too', async () => {
    const server = await startChangingHttpServer(first);
    servers.push(server);
    const url = await createTestDatabase();
    const store = ['--store', url, '--state-key', join(scratchFolder(), 'state.key')];
    const replica = async () => {
      const config = join(scratchFolder(), 'config.json');
      writeFileSync(config, JSON.stringify({ mcpServers: { shop: { url: server.url, protocol: '2025-11-25' } } }));
      const proxy = await startPinnedProxy(config, store);
      proxies.push(proxy);
      return { config, proxy };
    };
    const a = await replica();
    const b = await replica();
    for (const { proxy } of [a, b]) {
      expect((await proxy.search('look up an order')).map((hit) => hit.name)).toContain('shop__lookup');
    }

    const before = [a.proxy.lines.length, b.proxy.lines.length] as const;
    await server.change(changed);
    await a.proxy.waitFor(/tool "lookup" held \(changed: \/description/, before[0]);
    await b.proxy.waitFor(/tool "lookup" held \(changed: \/description/, before[1]);
    expect((await b.proxy.call('shop__lookup', { message: '42' })).isError).toBe(true);

    const deciding = b.proxy.lines.length;
    const accepted = await runPins(a.config, ['accept', 'shop', 'lookup', ...store.slice(0, 2)]);
    expect(accepted.code).toBe(0);
    expect(accepted.stdout).toContain(`signalled the running proxy (pid ${a.proxy.pid})`);
    // B's pid file was not signalled: only the store told it.
    await b.proxy.waitFor(/pins: a decision in the store; re-checked the servers' last listings/, deciding);
    expect(b.proxy.lines.slice(deciding).some((line) => /SIGHUP/.test(line))).toBe(false);
    const found = await b.proxy.search('look up an order');
    expect(found.find((hit) => hit.name === 'shop__lookup')?.description).toBe(changed[0]?.description);
    expect(textOf(await b.proxy.call('shop__lookup', { message: '43' }))).toBe('lookup ran: 43');
  });
});
