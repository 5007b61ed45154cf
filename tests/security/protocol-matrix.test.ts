/**
 * Issue 31 acceptance, the matrix, through the real CLIs: {v2 client speaking 2026-07-28, v1
 * client speaking 2025-11-25} × {2026-only downstream, 2025-only downstream} × {stdio, Streamable
 * HTTP}. Search mode, every cell: a search opens the call and a call with no search is refused;
 * over HTTP with two inbound tokens, one principal's search never opens a call for another, and a
 * forged handle opens nothing. Transparent mode, every cell: a listable tool is called without
 * listing first, and a tool hidden by `filters.access_control` is refused.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as V1StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport as V1StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, describe, expect, it } from 'vitest';
import { startHttpProxy } from '../transparent/cli-process';
import { startHttpCli } from './fixtures/http-cli';

const tsx = resolve('node_modules/tsx/dist/esm/index.mjs');
const downstreams = {
  '2026-only downstream': resolve('tests/fixtures/modern-stdio-fixture-server.ts'),
  '2025-only downstream': resolve('tests/fixtures/stdio-fixture-server.ts'),
} as const;
const alice = 'alice-token-0123456789abcdef';
const bob = 'bob-token-0123456789abcdefgh';
const offline = { ...process.env, EXTENSIBLE_MCP_OFFLINE: '1', EXTENSIBLE_MCP_MODEL_DIR: join(tmpdir(), 'no-model') };

const children: ChildProcess[] = [];
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  await Promise.allSettled(closers.splice(0).map((close) => close()));
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** A config folder whose one server is `entry` (a TypeScript stdio fixture), with tokens for alice and bob. */
function folderFor(entry: string): string {
  const folder = mkdtempSync(join(tmpdir(), 'emcp-matrix-'));
  const config = { mcpServers: { fx: { command: process.execPath, args: ['--import', tsx, entry] } } };
  writeFileSync(join(folder, 'config.json'), JSON.stringify(config));
  writeFileSync(join(folder, 'inbound'), `alice=${alice}\nbob=${bob}\n`);
  return folder;
}

/** What a test needs of a client, whichever SDK it comes from. */
interface AnyClient {
  callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<unknown>;
  close(): Promise<void>;
}

type ClientKind = 'v2 client, 2026-07-28' | 'v1 client, 2025-11-25';
const clientKinds: ClientKind[] = ['v2 client, 2026-07-28', 'v1 client, 2025-11-25'];

/** A client of `kind` running a CLI (its bin and arguments in `args`) as its stdio child. */
async function overStdio(kind: ClientKind, args: string[]): Promise<AnyClient> {
  const params = {
    command: process.execPath,
    args,
    env: offline as Record<string, string>,
    stderr: 'pipe' as const,
  };
  const client: AnyClient =
    kind === 'v2 client, 2026-07-28'
      ? await connected(
          new Client({ name: 'v2', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } }),
          new StdioClientTransport(params),
        )
      : await connectedV1(new V1StdioClientTransport(params));
  closers.push(() => client.close());
  return client;
}

async function overHttp(kind: ClientKind, url: string, token: string): Promise<AnyClient> {
  const requestInit = { headers: { authorization: `Bearer ${token}` } };
  const client: AnyClient =
    kind === 'v2 client, 2026-07-28'
      ? await connected(
          new Client({ name: 'v2', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } }),
          new StreamableHTTPClientTransport(new URL(url), { requestInit }),
        )
      : await connectedV1(new V1StreamableHTTPClientTransport(new URL(url), { requestInit }));
  closers.push(() => client.close());
  return client;
}

async function connected(client: Client, transport: StdioClientTransport | StreamableHTTPClientTransport) {
  await client.connect(transport);
  expect(client.getProtocolEra()).toBe('modern');
  return client as unknown as AnyClient;
}

async function connectedV1(transport: V1StdioClientTransport | V1StreamableHTTPClientTransport) {
  const client = new V1Client({ name: 'v1', version: '1' });
  await client.connect(transport);
  return client as unknown as AnyClient;
}

function textOf(result: unknown): string {
  const content = (result as { content?: { text?: string }[] }).content ?? [];
  return content.map((block) => block.text ?? '').join('\n');
}

/** Searches and returns the call's arguments, with the handle when the search returned one (a 2026 client). */
async function searched(client: AnyClient): Promise<Record<string, unknown>> {
  const found = await client.callTool({ name: 'search_tools', arguments: { query: 'echo back a message' } });
  const structured = (found as { structuredContent?: { handle?: string; results: { name: string }[] } })
    .structuredContent;
  expect(structured?.results.map((hit) => hit.name)).toContain('fx__echo');
  return {
    tool_name: 'fx__echo',
    arguments: { message: 'matrix' },
    ...(structured?.handle !== undefined && { handle: structured.handle }),
  };
}

const echo = { tool_name: 'fx__echo', arguments: { message: 'matrix' } };

describe.each(Object.entries(downstreams))('search mode with a %s', (_downstream, entry) => {
  describe.each(clientKinds)('%s', (kind) => {
    it('over stdio: a search opens the call; a call with no search is refused', async () => {
      const folder = folderFor(entry);
      const client = await overStdio(kind, [
        resolve('bin/extensible-mcp.mjs'),
        ...['--config', join(folder, 'config.json'), '--store', 'memory:'],
      ]);
      const refused = await client.callTool({ name: 'call_tool', arguments: echo });
      expect(textOf(refused)).toMatch(/has not been discovered/);
      expect(textOf(await client.callTool({ name: 'call_tool', arguments: await searched(client) }))).toMatch(
        /^echo: matrix$/i,
      );
    });

    it('over HTTP with two tokens: a search opens the call for its principal only; a forged handle opens nothing', async () => {
      const cli = await startHttpCli(folderFor(entry), {
        extra: ['--store', 'memory:'],
        started: (child) => children.push(child),
      });
      const a = await overHttp(kind, cli.url, alice);
      const b = await overHttp(kind, cli.url, bob);
      expect(textOf(await a.callTool({ name: 'call_tool', arguments: echo }))).toMatch(/has not been discovered/);
      const args = await searched(a);
      // Bob presents exactly what alice's search gave her (for a 2026 client, her handle).
      expect(textOf(await b.callTool({ name: 'call_tool', arguments: args }))).toMatch(/has not been discovered/);
      expect(
        textOf(await b.callTool({ name: 'call_tool', arguments: { ...echo, handle: 'dh_AAAAAAAAAAAAAAAAAAAAAA' } })),
      ).toMatch(/has not been discovered/);
      expect(textOf(await a.callTool({ name: 'call_tool', arguments: args }))).toMatch(/^echo: matrix$/i);
    });
  });
});

/** A transparent-mode YAML config for `entry`, hiding its `whoami` tool. */
function transparentConfig(entry: string): string {
  const folder = mkdtempSync(join(tmpdir(), 'emcp-matrix-t-'));
  const path = join(folder, 'config.yaml');
  writeFileSync(
    path,
    `upstream:\n  command: ${JSON.stringify(process.execPath)}\n  args: ${JSON.stringify(['--import', tsx, entry])}\nfilters:\n  access_control:\n    deny: [whoami]\n`,
  );
  return path;
}

async function transparentOverHttp(kind: ClientKind, entry: string): Promise<AnyClient> {
  const proxy = await startHttpProxy(transparentConfig(entry));
  closers.push(() => proxy.stop());
  return overHttp(kind, proxy.url, 'unused-without-http-tokens');
}

/** What transparent mode owes every client: a listable tool called at once, the hidden one refused. */
async function callsWithoutListingAndRefusesTheHidden(client: AnyClient): Promise<void> {
  expect(textOf(await client.callTool({ name: 'echo', arguments: { message: 'matrix' } }))).toMatch(/^echo: matrix$/i);
  const hidden = await client.callTool({ name: 'whoami', arguments: {} });
  expect((hidden as { isError?: boolean }).isError).toBe(true);
  expect(textOf(hidden)).toMatch(/whoami/);
}

describe.each(Object.entries(downstreams))('transparent mode with a %s', (_downstream, entry) => {
  describe.each(clientKinds)('%s', (kind) => {
    it('over HTTP: calls a listable tool without listing first, and refuses the hidden one', async () => {
      await callsWithoutListingAndRefusesTheHidden(await transparentOverHttp(kind, entry));
    });

    it('over stdio: calls a listable tool without listing first, and refuses the hidden one', async () => {
      const client = await overStdio(kind, [
        resolve('bin/mcp-elicitation-proxy.mjs'),
        ...['--config', transparentConfig(entry)],
      ]);
      await callsWithoutListingAndRefusesTheHidden(client);
    });
  });
});
