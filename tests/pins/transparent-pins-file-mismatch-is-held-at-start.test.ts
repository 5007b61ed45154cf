/**
 * Issue 30 acceptance, transparent mode (SPEC §3.13, docs/pinning.md "The pins file"): the YAML's
 * `pins` file fixes the upstream's hashes ahead of first use, under `proxy.name`. The real
 * `mcp-elicitation-proxy` serves a real stdio upstream: the tool whose hash differs from the file's
 * is held at its first listing (left out of `tools/list`, refused naming the review) and the log
 * names it; the tool whose hash matches is admitted. A malformed pins file is a config error.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterEach, expect, it } from 'vitest';
import { pinDefinition } from '../../proxy/index';
import { cleanupStack } from '../gateway/support';
import { startStdioProxy } from '../transparent/cli-process';
import { runPins, scratchFolder, stdioServer, textOf, writeListing } from './fixtures/pinned-proxy';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

/** A tool exactly as the changing server lists it. */
const definition = (name: string, description: string) => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { message: { type: 'string' } } },
});

/** A transparent YAML serving the changing stdio server as `shop`, with `extra` appended. */
function transparentConfig(folder: string, extra: string): string {
  const listing = join(folder, 'listing.json');
  writeListing(listing, [
    { name: 'lookup', description: 'Looks up an order by its number' },
    { name: 'echo', description: 'Echoes the message back' },
  ]);
  const upstream = stdioServer(listing);
  const config = join(folder, 'transparent.yaml');
  writeFileSync(
    config,
    `proxy:\n  name: shop\nupstream:\n  command: ${JSON.stringify(upstream.command)}\n  args: ${JSON.stringify(upstream.args)}\n${extra}`,
  );
  return config;
}

it('a pins file with a wrong hash holds that upstream tool at start and logs it; the matching one is admitted', async () => {
  const folder = scratchFolder();
  const lookupHash = pinDefinition(definition('lookup', 'Looks up an order by its number')).hash;
  const echoHash = pinDefinition(definition('echo', 'Echoes the message back')).hash;
  const wrong = 'e'.repeat(64);
  writeFileSync(join(folder, 'pins.json'), JSON.stringify({ servers: { shop: { lookup: lookupHash, echo: wrong } } }));
  const config = transparentConfig(folder, 'pins: pins.json\n');

  const proxy = startStdioProxy(config);
  cleanups.push(() => proxy.child.kill('SIGKILL'));
  await proxy.log.waitFor(/pins file: .*pins\.json \(1 servers fixed ahead of first use\)/);
  expect(proxy.log.text()).toContain(`pins file: ${join(folder, 'pins.json')} (1 servers fixed ahead of first use)`);
  const client = new Client({ name: 'pins-file-2025', version: '1.0.0' });
  await client.connect(proxy.transport);
  cleanups.push(() => client.close());

  const { tools } = await client.listTools();
  expect(tools.map((tool) => tool.name)).toEqual(['lookup']);
  await proxy.log.waitFor(
    new RegExp(
      `server "shop": tool "echo" held \\(changed: \\(whole\\); pinned eeeeeeeeeeee, listed ${echoHash.slice(0, 12)}\\)`,
    ),
  );
  expect(proxy.log.text()).not.toMatch(/first listing/);
  expect(proxy.log.text()).not.toMatch(/tool "lookup" held/);

  const refused = (await client.callTool({ name: 'echo', arguments: { message: 'x' } })) as CallToolResult;
  expect(refused.isError).toBe(true);
  expect(textOf(refused)).toBe(
    'The definition of "echo" changed and is held for the operator\'s review (extensible-mcp pins diff shop echo).',
  );
  const lookup = (await client.callTool({ name: 'lookup', arguments: { message: '9' } })) as CallToolResult;
  expect(textOf(lookup)).toBe('lookup ran: 9');

  const listed = await runPins(config, ['list', '--json']);
  expect(JSON.parse(listed.stdout)).toEqual([
    { server: 'shop', tool: 'echo', state: 'pending-changed', pinned: wrong, held: echoHash },
    { server: 'shop', tool: 'lookup', state: 'pinned', pinned: lookupHash },
  ]);
});

it('a malformed pins file is a config error (exit 2) that names it', async () => {
  const folder = scratchFolder();
  writeFileSync(join(folder, 'pins.json'), JSON.stringify({ servers: { shop: { echo: 'not a hash' } } }));
  const proxy = startStdioProxy(transparentConfig(folder, 'pins: pins.json\n'));
  cleanups.push(() => proxy.child.kill('SIGKILL'));
  expect((await proxy.exited).code).toBe(2);
  expect(proxy.log.text()).toContain(`${join(folder, 'pins.json')}: invalid pins file:`);
});
