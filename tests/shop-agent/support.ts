import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  createDeterministicClerk,
  createShop,
  createShopServer,
  type HttpServerOptions,
  loadOrCreateMerchantKey,
  openOrderStore,
  type RunningHttpServer,
  type ShopOptions,
  startHttpServer,
} from '../../shop-agent/index.js';

/** Repository root, so the shop is started exactly as documented: `shop-agent/main.ts`. */
export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Command and args that run the shop's entry with tsx. */
export const SHOP_COMMAND = process.execPath;
export const SHOP_ARGS = ['--import', 'tsx', 'shop-agent/main.ts'];

/** A minimal, explicit environment for the child: no inherited API keys. */
export function shopEnv(extra: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...extra };
}

/** What {@link callTool} needs of a client: the v2 `Client` and the v1 one both have it. */
export type ToolCaller = { callTool(params: { name: string; arguments?: Record<string, unknown> }): Promise<unknown> };

/** Call a tool and return its result, typed. */
export async function callTool(
  client: ToolCaller,
  name: string,
  args: Record<string, unknown> = {},
): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

/** A v2 client pinned to 2026-07-28: it opens with `server/discover` and never falls back to `initialize`. */
export function modernClient(name: string): Client {
  return new Client({ name, version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
}

/** A v1 SDK client (the dev dependency), which speaks 2025-11-25: `initialize`, then requests. */
export function legacyClient(name: string): V1Client {
  return new V1Client({ name, version: '1.0.0' });
}

/** A `fetch` that records what a client sent: each POST's JSON-RPC method, or the HTTP method otherwise. */
export function recordingFetch(): { fetch: typeof fetch; sent: string[] } {
  const sent: string[] = [];
  return {
    sent,
    fetch: (input, init) => {
      const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as { method?: string }) : undefined;
      sent.push(body?.method ?? init?.method ?? 'GET');
      return fetch(input, init);
    },
  };
}

/** The structured content of a successful result (fails the test on a refusal). */
export function okContent(result: CallToolResult): Record<string, unknown> {
  if (result.isError === true) throw new Error(`tool refused: ${JSON.stringify(result.content)}`);
  return result.structuredContent as Record<string, unknown>;
}

/** One JSON log line of a shop process (`{ts, source, event, …}`). */
export type ShopLogLine = Record<string, unknown> & { event: string };

/** A shop child process in HTTP mode: its port, its log lines so far, and how to stop it. */
export type HttpShopProcess = {
  child: ChildProcess;
  port: number;
  events: ShopLogLine[];
  /** The first log line that matches, now or when it comes (an event to wait on, not a sleep). */
  logged(match: (line: ShopLogLine) => boolean): Promise<ShopLogLine>;
  stop(): Promise<void>;
};

/**
 * Start the shop in HTTP mode (on a free port, or on `port` to restart it where it was) and
 * resolve once it logs `server-started` (waiting on the event, not a sleep).
 */
export function startHttpShop(env: Record<string, string>, options: { port?: number } = {}): Promise<HttpShopProcess> {
  const child = spawn(SHOP_COMMAND, [...SHOP_ARGS, '--http', '--port', String(options.port ?? 0)], {
    cwd: REPO_ROOT,
    env: shopEnv(env),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  const events: ShopLogLine[] = [];
  const waiters = new Set<{ match: (line: ShopLogLine) => boolean; resolve: (line: ShopLogLine) => void }>();
  const logged = (match: (line: ShopLogLine) => boolean) =>
    new Promise<ShopLogLine>((resolve) => {
      const seen = events.find(match);
      if (seen === undefined) waiters.add({ match, resolve });
      else resolve(seen);
    });
  return new Promise((resolve, reject) => {
    let buffer = '';
    let partial = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      buffer += chunk;
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.startsWith('{')) continue;
        const event = JSON.parse(line) as ShopLogLine;
        events.push(event);
        for (const waiter of waiters) {
          if (!waiter.match(event)) continue;
          waiters.delete(waiter);
          waiter.resolve(event);
        }
        if (event.event === 'server-started') resolve({ child, port: event.port as number, events, logged, stop });
      }
    });
    child.once('exit', (code) => reject(new Error(`shop exited with ${code} before starting: ${buffer}`)));
  });
}

/** An in-process shop over real HTTP on loopback, wired like `main.ts` but with test knobs. */
export type InProcessShop = { server: RunningHttpServer; events: { event: string; fields: Record<string, unknown> }[] };

/**
 * Start the shop's own HTTP server factory in this process (a real socket on 127.0.0.1), so a
 * test can inject the shop's clock or the server's limits. `close()` also removes the data folder.
 */
export async function startInProcessShop(
  options: {
    settlementDid?: string;
    now?: () => Date;
    http?: Partial<Omit<HttpServerOptions, 'createMcpServer' | 'didDocument'>>;
  } = {},
): Promise<InProcessShop> {
  const dataDir = mkdtempSync(join(tmpdir(), 'shop-inproc-'));
  const events: InProcessShop['events'] = [];
  const log = (event: string, fields: Record<string, unknown>) => {
    events.push({ event, fields });
  };
  const key = await loadOrCreateMerchantKey(dataDir);
  const orders = openOrderStore(join(dataDir, 'orders.sqlite'));
  const shopOptions: ShopOptions = {
    key,
    orders,
    clerk: createDeterministicClerk(),
    merchantName: 'Test Pizza',
    settlementDid: options.settlementDid,
    log,
    ...(options.now === undefined ? {} : { now: options.now }),
  };
  const shop = createShop(shopOptions);
  const server = await startHttpServer({
    host: '127.0.0.1',
    port: 0,
    log,
    ...options.http,
    createMcpServer: () => createShopServer({ shop, log }),
    didDocument: shop.card().didDocument,
  });
  return {
    events,
    server: {
      ...server,
      async close() {
        await server.close();
        orders.close();
        rmSync(dataDir, { recursive: true, force: true });
      },
    },
  };
}

/**
 * A `fetch` whose connections leave from `localAddress` (any 127.0.0.0/8 address is loopback on
 * Linux), so a test can play two different remote addresses against one server.
 */
export function fetchFrom(localAddress: string): typeof fetch {
  return (input, init) =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const headers = new Headers(init?.headers);
      const outgoing = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          path: `${url.pathname}${url.search}`,
          method: init?.method ?? 'GET',
          headers: Object.fromEntries(headers.entries()),
          localAddress,
          agent: false,
        },
        (response) => {
          const body = response.statusCode === 204 ? null : (Readable.toWeb(response) as ReadableStream<Uint8Array>);
          resolve(new Response(body, { status: response.statusCode ?? 0, headers: toHeaders(response.headers) }));
        },
      );
      outgoing.on('error', reject);
      init?.signal?.addEventListener('abort', () => outgoing.destroy(new Error('aborted')), { once: true });
      if (typeof init?.body === 'string') outgoing.end(init.body);
      else outgoing.end();
    });
}

function toHeaders(incoming: IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return headers;
}

/** A real SDK client over Streamable HTTP, its connections leaving from `localAddress`. */
export async function connectHttpFrom(url: string, localAddress = '127.0.0.1'): Promise<Client> {
  const client = new Client({ name: 'shop-security-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: fetchFrom(localAddress) }));
  return client;
}
