/**
 * Issue 31 acceptance: a 2026-07-28 client has no session, so what it discovered lives in the
 * discovery store under (principal, handle). Two real proxy processes on one SQLite store (and,
 * issue 28, on one PostgreSQL database with one shared request-state key file),
 * behind a round-robin of the test's own that sends each HTTP request to the other process: a
 * search through one and a call through the other go through for the same principal, and are
 * refused for another principal holding the same handle, or for a forged one.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';
import { startHttpCli } from './fixtures/http-cli';

const alice = 'alice-token-0123456789abcdef';
const bob = 'bob-token-0123456789abcdefgh';
const children: ChildProcess[] = [];
const servers: Server[] = [];
const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
  for (const server of servers.splice(0)) server.close();
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** One proxy process with its own config folder (one proxy per config), tokens for alice and bob, the shared store's flags. */
async function startProxy(folder: string, storeFlags: readonly string[]): Promise<string> {
  const cli = await startHttpCli(folder, { extra: storeFlags, started: (child) => children.push(child) });
  return cli.url;
}

/** A fresh shared store: the proxies' `--store` flags, and the scope keys it holds (read from outside, as its operator could). */
interface SharedStore {
  readonly flags: readonly string[];
  scopes(): Promise<string[]>;
}

const sharedStores: Record<string, () => Promise<SharedStore>> = {
  sqlite: async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'emcp-shared-store-')), 'proxy.sqlite');
    return {
      flags: ['--store', `sqlite:${path}`],
      async scopes() {
        const database = new Database(path, { readonly: true });
        try {
          return database
            .prepare<[], { scope: string }>('SELECT scope FROM discovery_scopes')
            .all()
            .map((row) => row.scope);
        } finally {
          database.close();
        }
      },
    };
  },
  ...(postgresAvailable && {
    postgres: async () => {
      const url = await createTestDatabase();
      return {
        flags: ['--store', url, '--state-key', join(mkdtempSync(join(tmpdir(), 'emcp-shared-key-')), 'state.key')],
        async scopes() {
          const client = new pg.Client({ connectionString: url });
          await client.connect();
          try {
            const found = await client.query<{ scope: string }>('SELECT scope FROM discovery_scopes');
            return found.rows.map((row) => row.scope);
          } finally {
            await client.end();
          }
        },
      };
    },
  }),
};

/** A loopback round-robin: each HTTP request goes to the next backend; records who served what. */
async function roundRobin(backends: readonly string[]) {
  let next = 0;
  const served: { backend: number; body: string }[] = [];
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const backend = next % backends.length;
    next += 1;
    served.push({ backend, body });
    const headers = new Headers();
    for (const [name, value] of Object.entries(request.headers)) {
      if (typeof value === 'string' && name !== 'host' && name !== 'content-length') headers.set(name, value);
    }
    const answer = await fetch(backends[backend] ?? '', {
      method: request.method ?? 'POST',
      headers,
      ...(request.method === 'POST' && { body }),
    });
    response.writeHead(answer.status, Object.fromEntries(answer.headers));
    response.end(Buffer.from(await answer.arrayBuffer()));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/mcp`, served };
}

async function modernClient(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'modern', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  clients.push(client);
  return client;
}

/** The handle with one character changed in its middle, where every character carries six bits. */
const forgedFrom = (handle: string) => `${handle.slice(0, 10)}${handle[10] === 'A' ? 'B' : 'A'}${handle.slice(11)}`;

const textOf = (result: { content?: unknown }) =>
  ((result.content ?? []) as { type: string; text?: string }[]).map((block) => block.text ?? '').join('');

it.skipIf(postgresAvailable)(`two proxies on PostgreSQL are skipped: ${postgresUnavailable}`, () => {});

describe.each(Object.entries(sharedStores))(
  'two proxy processes on one %s discovery store, behind a round-robin',
  (_name, makeStore) => {
    it('a 2026 client searches through one and calls through the other; another principal cannot use its handle', async () => {
      const store = await makeStore();
      const instance = () => {
        const folder = mkdtempSync(join(tmpdir(), 'emcp-instance-'));
        writeFileSync(
          join(folder, 'config.json'),
          JSON.stringify({
            mcpServers: {
              fixture: {
                command: process.execPath,
                args: ['--import', 'tsx', 'tests/fixtures/stdio-fixture-server.ts'],
              },
            },
          }),
        );
        writeFileSync(join(folder, 'inbound'), `alice=${alice}\nbob=${bob}\n`);
        return startProxy(folder, store.flags);
      };
      const backends = await Promise.all([instance(), instance()]);
      const balancer = await roundRobin(backends);

      const asAlice = await modernClient(balancer.url, alice);
      expect(asAlice.getProtocolEra()).toBe('modern');
      const found = await asAlice.callTool({ name: 'search_tools', arguments: { query: 'echo the message back' } });
      const handle = (found.structuredContent as { handle?: string }).handle ?? '';
      expect(handle).toMatch(/^dh_/);
      const called = await asAlice.callTool({
        name: 'call_tool',
        arguments: { tool_name: 'fixture__echo', arguments: { message: 'across instances' }, handle },
      });
      expect(textOf(called)).toBe('echo: across instances');
      const backendOf = (fragment: string) => balancer.served.find((entry) => entry.body.includes(fragment))?.backend;
      // The search and the call really reached different processes.
      expect(backendOf('"search_tools"')).toBeDefined();
      expect(backendOf('"call_tool"')).not.toBe(backendOf('"search_tools"'));

      // The store holds alice's scope under its digest: never the handle, nor anything containing it.
      const scopes = await store.scopes();
      expect(scopes).toHaveLength(1);
      expect(scopes[0]).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(scopes.join('')).not.toContain(handle.slice(3));

      const asBob = await modernClient(balancer.url, bob);
      for (const attempt of [handle, 'dh_AAAAAAAAAAAAAAAAAAAAAA']) {
        const refused = await asBob.callTool({
          name: 'call_tool',
          arguments: { tool_name: 'fixture__echo', arguments: { message: 'stolen' }, handle: attempt },
        });
        expect(refused.isError).toBe(true);
        expect(textOf(refused)).toMatch(/has not been discovered under this handle/);
      }
      const forged = await asAlice.callTool({
        name: 'call_tool',
        arguments: { tool_name: 'fixture__echo', arguments: { message: 'forged' }, handle: forgedFrom(handle) },
      });
      expect(forged.isError).toBe(true);
    });
  },
);
