/**
 * Issue 30: letting `load_mcp_server` reach a server on `http://localhost` was a library option
 * only (`allowLocalhostLoads`), so a CLI user could not load a local server at run time. The
 * operator opts in with `"load_control": {"allow_localhost": true}` or `--allow-localhost-loads`;
 * without either the load is refused before anything is dialled. Driven from outside: the real
 * CLI over stdio, a real Streamable HTTP server on loopback.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type HttpFixture, startHttpFixture } from '../fixtures/http-fixture-server';
import { callTool, searchNames, textOf } from '../proxy/helpers';

let fixture: HttpFixture;
beforeAll(async () => {
  fixture = await startHttpFixture();
});
afterAll(() => fixture.close());
const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
});

/** The CLI over stdio on a config with no servers and `filters`, plus `flags`. */
async function cliWith(filters: Record<string, unknown>, flags: string[] = []): Promise<Client> {
  const config = join(mkdtempSync(join(tmpdir(), 'emcp-localhost-')), 'config.json');
  writeFileSync(config, JSON.stringify({ mcpServers: {}, filters }));
  const client = new Client({ name: 'localhost-loads', version: '1' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: ['bin/extensible-mcp.mjs', '--config', config, ...flags],
      env: {
        ...process.env,
        EXTENSIBLE_MCP_OFFLINE: '1',
        EXTENSIBLE_MCP_MODEL_DIR: join(tmpdir(), 'no-model'),
      } as Record<string, string>,
      stderr: 'ignore',
    }),
  );
  clients.push(client);
  return client;
}

function load(client: Client) {
  return client.callTool({ name: 'load_mcp_server', arguments: { server_name: 'local', url: fixture.url } });
}

describe('load_mcp_server and a server on localhost', () => {
  it('is refused by default, and the local server is never dialled', async () => {
    const before = fixture.seen.length;
    const refused = await load(await cliWith({}));
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/Refused to load "local": only https:/);
    expect(fixture.seen.length).toBe(before);
  });

  it.each([
    ['"load_control": {"allow_localhost": true}', { load_control: { allow_localhost: true } }, []],
    ['--allow-localhost-loads', {}, ['--allow-localhost-loads']],
  ])('is loaded, searched and called once the operator allows it with %s', async (_, filters, flags) => {
    const client = await cliWith(filters, flags);
    const loaded = await load(client);
    expect(loaded.isError).not.toBe(true);
    expect(await searchNames(client, 'echoes back the message')).toContain('local__echo');
    expect(textOf(await callTool(client, 'local__echo', { message: 'from localhost' }))).toBe('echo: from localhost');
  });

  it('still keeps the operator narrower: a load_control deny wins over allow_localhost', async () => {
    const client = await cliWith({ load_control: { allow_localhost: true, deny_names: ['local'] } });
    const before = fixture.seen.length;
    const refused = await load(client);
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/local/);
    expect(fixture.seen.length).toBe(before);
  });
});
