import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type NodeIncomingMessageLike, toNodeHandler } from '@modelcontextprotocol/node';
import {
  CLIENT_INFO_META_KEY,
  createMcpHandler,
  type McpHttpHandler,
  type McpServer,
} from '@modelcontextprotocol/server';
import type { DidDocument } from './did-document.js';
import { ShopError } from './shop-error.js';

/** Options for the shop's Streamable HTTP endpoint. */
export type HttpServerOptions = {
  /** Builds the MCP server that answers one request (the SDK's handler keeps nothing between requests). */
  createMcpServer: () => McpServer;
  /**
   * Builds the witness's own MCP server (operator tools, never the model-facing ones), served the
   * same way at `/witness`; absent → `/witness` is a 404.
   */
  createWitnessServer?: () => McpServer;
  didDocument: DidDocument;
  host: string;
  port: number;
  /** Extra Host header names to accept besides loopback (e.g. the compose service name). */
  allowedHostnames?: readonly string[];
  /** MCP requests one remote address may have in flight at once; default {@link DEFAULT_MAX_REQUESTS_PER_ADDRESS}. */
  maxRequestsPerAddress?: number;
  log?: (event: string, fields: Record<string, unknown>) => void;
};

/** One MCP endpoint behind the guards: the SDK's handler, adapted to Node, given the parsed body of a POST. */
type Endpoint = (request: IncomingMessage, response: ServerResponse, body?: unknown) => Promise<void>;

/** A running HTTP server: its base URL and how to stop it. */
export type RunningHttpServer = { url: string; port: number; close(): Promise<void> };

/**
 * Default bound on one address's MCP requests in flight: far above what a household's agent
 * sends at once (one call per chat turn), low enough that one client cannot hold the shop's
 * memory with slow or never-finished requests.
 */
export const DEFAULT_MAX_REQUESTS_PER_ADDRESS = 64;

const MAX_BODY_BYTES = 1_000_000;

/**
 * Serve the shop over Streamable HTTP at `/mcp` and its DID document at `/.well-known/did.json`,
 * statelessly: the SDK's `createMcpHandler` builds a server per request, for 2026-07-28 clients
 * and, by its default `legacy: 'stateless'`, for 2025-11-25 ones (their `initialize` is answered
 * without an `Mcp-Session-Id`). Nothing is held between requests, so a shop restart or a second
 * replica is invisible to clients. Every request's Host header is checked against loopback plus
 * the configured names first (DNS-rebinding protection for a server without authentication), then
 * its Origin, if any, must be the shop's own (no cross-site requests from a browser page). What
 * one client can hold is bounded per request: the body size, and the requests one remote address
 * has in flight (issue 11: one client must not lock everyone else out).
 */
export async function startHttpServer(options: HttpServerOptions): Promise<RunningHttpServer> {
  const log = options.log ?? (() => {});
  const allowed = new Set(
    ['localhost', '127.0.0.1', '[::1]', ...(options.allowedHostnames ?? [])].map((name) => name.toLowerCase()),
  );
  if (!['0.0.0.0', '::'].includes(options.host))
    allowed.add(options.host.includes(':') ? `[${options.host}]` : options.host);
  const inFlight = createInFlightLimit(options.maxRequestsPerAddress ?? DEFAULT_MAX_REQUESTS_PER_ADDRESS);
  // The handler reports the requests it refused (an unsupported version, a malformed envelope);
  // the adapter reports the ones it could not hand over at all (answered 500).
  const onerror = (error: Error) => log('request-rejected', { error: error.message.slice(0, 300) });
  const onfault = (error: Error) => log('http-fault', { error: error.message.slice(0, 300) });
  // One web-standard handler per endpoint, adapted to Node once; the handlers validate no Host or
  // Origin, which is why the checks below run before either is reached.
  const handlers: McpHttpHandler[] = [];
  const endpoint = (factory: () => McpServer): Endpoint => {
    const handler = createMcpHandler(factory, { onerror, maxRequestBodySize: MAX_BODY_BYTES });
    handlers.push(handler);
    const serve = toNodeHandler(handler, { onerror: onfault, maxRequestBodySize: MAX_BODY_BYTES });
    // Node's `method?: string | undefined` against the SDK's structural `method?: string`: the
    // same at run time, told apart only under `exactOptionalPropertyTypes`.
    return (request, response, body) => serve(request as NodeIncomingMessageLike, response, body);
  };
  const mcp = endpoint(options.createMcpServer);
  const witness = options.createWitnessServer === undefined ? undefined : endpoint(options.createWitnessServer);

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    // Step 1: DNS-rebinding protection: a foreign Host never reaches a handler.
    const hostname = hostnameOf(request.headers.host);
    if (hostname === null || !allowed.has(hostname)) {
      log('host-rejected', { host: (request.headers.host ?? '').slice(0, 100) });
      return sendJson(response, 403, rpcError(`Invalid Host header: ${(request.headers.host ?? '').slice(0, 100)}`));
    }
    // Step 2: a browser page on another origin never reaches a handler either. Browsers send
    // Origin on cross-origin requests (and on every POST); only the shop's own origin, the one
    // its Host names, is accepted. Clients that are not browsers send no Origin.
    const origin = request.headers.origin;
    if (origin !== undefined && !isSameOrigin(origin, request.headers.host ?? '')) {
      log('origin-rejected', { origin: origin.slice(0, 100) });
      return sendJson(response, 403, rpcError(`Invalid Origin header: ${origin.slice(0, 100)}`));
    }
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    if (path === '/.well-known/did.json' && request.method === 'GET')
      return sendJson(response, 200, options.didDocument);
    if (path === '/healthz' && request.method === 'GET') return sendJson(response, 200, { ok: true });
    const serve = path === '/mcp' ? mcp : path === '/witness' ? witness : undefined;
    if (serve === undefined) return sendJson(response, 404, { error: 'not found' });

    // Step 3: one address has a bounded number of requests in flight, counted from the headers to
    // the end of the response, so slow bodies and open streams count too.
    const address = remoteAddressOf(request);
    const release = inFlight.begin(address);
    if (release === undefined) {
      log('request-refused', { address });
      return sendJson(
        response,
        429,
        rpcError('Too many requests in flight from this address; retry once one has completed'),
      );
    }
    response.once('close', release);

    // Step 4: the body, bounded, read here (the handler's body parser) so that a client's
    // opening can be logged; then the SDK's handler.
    if (request.method !== 'POST') return serve(request, response);
    const body = await readJson(request);
    if (!body.ok) return sendJson(response, body.status, rpcError(body.message));
    const opening = serve === mcp ? openingOf(body.value) : undefined;
    if (opening !== undefined) {
      // An operator sees the household connect (`docker compose logs shop`), and a test can wait on it.
      response.once('finish', () => {
        if (response.statusCode === 200) log('client-connected', { address, ...opening });
      });
    }
    return serve(request, response, body.value);
  };

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      log('http-fault', { error: error instanceof Error ? error.message : 'unknown' });
      if (!response.headersSent) sendJson(response, 500, rpcError('Internal server error'));
      else response.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) =>
      reject(new ShopError('transport', `cannot listen on ${options.host}:${options.port}`, { cause: error })),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    async close() {
      await Promise.all(handlers.map((handler) => handler.close()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A client's opening: the era it picks and the name it gives itself (shortened; only for the log). */
type Opening = { era: 'legacy' | 'modern'; client: string };

/**
 * Whether a message opens a client's conversation: a 2025 `initialize` (the name in its
 * `clientInfo`) or a 2026 `server/discover` probe (the name in its `_meta` envelope). Only for
 * the log: the SDK's handler does its own classifying, and nothing here decides anything.
 */
function openingOf(message: unknown): Opening | undefined {
  if (!isRecord(message) || !isRecord(message.params)) return undefined;
  const { method, params } = message;
  const nameOf = (info: unknown) => (isRecord(info) && typeof info.name === 'string' ? info.name.slice(0, 100) : '');
  if (method === 'initialize') return { era: 'legacy', client: nameOf(params.clientInfo) };
  if (method === 'server/discover') {
    const meta = isRecord(params._meta) ? params._meta : {};
    return { era: 'modern', client: nameOf(meta[CLIENT_INFO_META_KEY]) };
  }
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Requests in flight per remote address, at most `max` each. `begin` returns the function that
 * ends the request (idempotent), or undefined when the address is at its bound. An address with
 * nothing in flight has no entry, so the table holds only the addresses being served right now.
 */
function createInFlightLimit(max: number) {
  const counts = new Map<string, number>();
  return {
    begin(address: string): (() => void) | undefined {
      const held = counts.get(address) ?? 0;
      if (held >= max) return undefined;
      counts.set(address, held + 1);
      let done = false;
      return () => {
        if (done) return;
        done = true;
        const left = (counts.get(address) ?? 1) - 1;
        if (left === 0) counts.delete(address);
        else counts.set(address, left);
      };
    },
  };
}

/**
 * Whether an Origin header names the same origin as the (already validated) Host header: http or
 * https, same host and port. `null`, opaque and malformed origins are foreign.
 */
function isSameOrigin(origin: string, hostHeader: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(origin);
  } catch {
    return false;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return false;
  if (parsed.origin !== origin.toLowerCase().replace(/\/$/, '')) return false;
  try {
    return parsed.host === new URL(`${parsed.protocol}//${hostHeader}`).host;
  } catch {
    return false;
  }
}

/** The peer's address, IPv4-mapped IPv6 written as IPv4 so one client counts as one address. */
function remoteAddressOf(request: IncomingMessage): string {
  const address = request.socket.remoteAddress ?? 'unknown';
  return address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
}

/** The lower-cased hostname of a Host header (port dropped, IPv6 kept in brackets), or null. */
function hostnameOf(header: string | undefined): string | null {
  if (header === undefined || header.length === 0 || header.length > 255) return null;
  // A Host header carrying a path, credentials or whitespace is not host[:port]: refuse it.
  if (/[/\\@?#\s]/.test(header)) return null;
  try {
    return new URL(`http://${header}`).hostname.toLowerCase();
  } catch {
    return null;
  }
}

type JsonBody = { ok: true; value: unknown } | { ok: false; status: number; message: string };

/** A POST body read to the end within `MAX_BODY_BYTES` and parsed as JSON (the one parse of untrusted text here). */
async function readJson(request: IncomingMessage): Promise<JsonBody> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return { ok: false, status: 413, message: 'Request body too large' };
    chunks.push(chunk as Buffer);
  }
  try {
    return { ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
  } catch {
    return { ok: false, status: 400, message: 'Parse error: the body is not valid JSON' };
  }
}

function rpcError(message: string): unknown {
  return { jsonrpc: '2.0', error: { code: -32000, message }, id: null };
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
