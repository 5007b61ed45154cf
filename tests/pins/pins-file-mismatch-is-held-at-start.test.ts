/**
 * Issue 30 acceptance (SPEC §3.13): a config's `pins` file fixes tool hashes ahead of first use.
 * Its server's first listing is checked against them: a tool whose hash differs is held and the
 * startup log names it, while a tool whose hash matches, computed here from the definition the
 * server sends, is admitted. `pins list --json` prints the full hashes, as the file holds them.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { pinDefinition } from '../../proxy/index';
import { type PinnedProxy, runPins, scratchFolder, textOf } from './fixtures/pinned-proxy';
import { startShopProxy } from './fixtures/start-shop-proxy';

const proxies: PinnedProxy[] = [];
afterEach(async () => {
  await Promise.allSettled(proxies.splice(0).map((proxy) => proxy.close()));
});

/** A tool exactly as the changing server lists it. */
const definition = (name: string, description: string) => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { message: { type: 'string' } } },
});

it('a pins file with a wrong hash holds that tool at start and logs it; the matching one is admitted', async () => {
  const folder = scratchFolder();
  const lookupHash = pinDefinition(definition('lookup', 'Looks up an order by its number')).hash;
  const echoHash = pinDefinition(definition('echo', 'Echoes the message back')).hash;
  const wrong = 'e'.repeat(64);
  writeFileSync(join(folder, 'pins.json'), JSON.stringify({ servers: { shop: { lookup: lookupHash, echo: wrong } } }));
  const proxy = await startShopProxy(
    [
      { name: 'lookup', description: 'Looks up an order by its number' },
      { name: 'echo', description: 'Echoes the message back' },
    ],
    { folder, config: { pins: 'pins.json' } },
  );
  proxies.push(proxy);
  const { config } = proxy;
  expect(proxy.lines).toContain(
    `[extensible-mcp] pins file: ${join(folder, 'pins.json')} (1 servers fixed ahead of first use)`,
  );
  await proxy.waitFor(
    new RegExp(
      `server "shop": tool "echo" held \\(changed: \\(whole\\); pinned eeeeeeeeeeee, listed ${echoHash.slice(0, 12)}\\)`,
    ),
  );
  expect(proxy.lines.some((line) => /first listing/.test(line))).toBe(false);
  expect(proxy.lines.some((line) => /tool "lookup" held/.test(line))).toBe(false);

  expect((await proxy.search('echo the message back')).map((hit) => hit.name)).not.toContain('shop__echo');
  expect(textOf(await proxy.call('shop__echo', { message: 'x' }))).toMatch(/"shop__echo" changed and is held/);
  expect((await proxy.search('look up an order')).map((hit) => hit.name)).toContain('shop__lookup');
  expect(textOf(await proxy.call('shop__lookup', { message: '9' }))).toBe('lookup ran: 9');

  const listed = await runPins(config, ['list', '--json']);
  expect(listed.code).toBe(0);
  expect(JSON.parse(listed.stdout)).toEqual([
    { server: 'shop', tool: 'echo', state: 'pending-changed', pinned: wrong, held: echoHash },
    { server: 'shop', tool: 'lookup', state: 'pinned', pinned: lookupHash },
  ]);
  const diff = await runPins(config, ['diff', 'shop', 'echo']);
  expect(diff.stdout).toContain('  changed (the whole definition)');
  expect(diff.stdout).toContain('  (hash only, from the pins file)');
});
