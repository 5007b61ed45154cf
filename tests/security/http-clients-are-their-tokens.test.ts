/**
 * Issue 31 (principals) and issue 26 item 13: over `--http` the CLI had no authentication, and
 * anyone holding the endpoint could join another client's session by its id. With
 * `--http-tokens`, every request must present one of the tokens; its name is the principal; a
 * session belongs to the principal that opened it, and another principal's request for it is
 * answered as for an unknown session. Driven from outside: the real CLI, real HTTP on loopback.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { callTool, searchNames, textOf } from '../proxy/helpers';
import { type HttpCli, startHttpCli } from './fixtures/http-cli';

const alice = 'alice-token-0123456789abcdef';
const bob = 'bob-token-0123456789abcdefgh';
const children: ChildProcess[] = [];
const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

function folderWith(files: Record<string, string>): string {
  const folder = mkdtempSync(join(tmpdir(), 'emcp-tokens-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(folder, name), text);
  return folder;
}

const everything = {
  mcpServers: {
    everything: {
      command: process.execPath,
      args: ['node_modules/@modelcontextprotocol/server-everything/dist/index.js', 'stdio'],
    },
  },
};

/** Starts the CLI over HTTP with `tokens` as its inbound tokens file. */
function startHttp(tokens: string): Promise<HttpCli> {
  const folder = folderWith({ 'config.json': JSON.stringify(everything), inbound: tokens });
  return startHttpCli(folder, { started: (child) => children.push(child) });
}

async function clientWith(
  url: string,
  token: string,
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'token-test', version: '1.0.0' });
  await client.connect(transport);
  clients.push(client);
  return { client, transport };
}

const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const listTools = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} });

describe('--http with --http-tokens', () => {
  it("serves each token's client as its own principal, and another principal cannot use its session", async () => {
    const { url } = await startHttp(`# inbound clients\nalice=${alice}\nbob=${bob}\n`);
    const { client, transport } = await clientWith(url, alice);
    expect(await searchNames(client, 'echo back a message')).toContain('everything__echo');
    expect(textOf(await callTool(client, 'everything__echo', { message: 'mine' }))).toBe('Echo: mine');
    const session = transport.sessionId;
    expect(session).toMatch(/.+/);

    const asBob = await fetch(url, {
      method: 'POST',
      headers: { ...headers, authorization: `Bearer ${bob}`, 'mcp-session-id': session ?? '' },
      body: listTools,
    });
    expect(asBob.status).toBe(404);
    const asAlice = await fetch(url, {
      method: 'POST',
      headers: {
        ...headers,
        authorization: `Bearer ${alice}`,
        'mcp-session-id': session ?? '',
        'mcp-protocol-version': '2025-11-25',
      },
      body: listTools,
    });
    expect(asAlice.status).toBe(200);
  });

  it('refuses a request with no token, a wrong one, or a near miss, with 401', async () => {
    const { url } = await startHttp(`alice=${alice}\n`);
    for (const authorization of [undefined, `Bearer ${bob}`, `Bearer ${alice.slice(0, -1)}`, `Basic ${alice}`]) {
      const response = await fetch(url, {
        method: 'POST',
        headers: { ...headers, ...(authorization !== undefined && { authorization }) },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
        }),
      });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
  });

  it('refuses to start on a tokens file with a short token, naming the entry, never the token', async () => {
    const folder = folderWith({ 'config.json': JSON.stringify(everything), inbound: 'alice=short\n' });
    const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [
        'bin/extensible-mcp.mjs',
        '--config',
        join(folder, 'config.json'),
        '--http',
        '--http-tokens',
        join(folder, 'inbound'),
      ]);
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      child.once('exit', (code) => resolve({ code, stderr }));
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/the token of "alice" must be at least 16 characters/);
    expect(result.stderr).not.toContain('short');
  });
});
