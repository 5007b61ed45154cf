import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import type { McpServer } from '@modelcontextprotocol/server';
import { isInitializeRequest } from '@modelcontextprotocol/server';
import type { DidDocument } from './did-document.js';
import { createSessionTable, DEFAULT_SESSION_LIMITS, type SessionLimits } from './session-table.js';
import { ShopError } from './shop-error.js';

/** Options for the shop's Streamable HTTP endpoint. */
export type HttpServerOptions = {
  /** Builds one MCP server per session (an McpServer serves one transport). */
  createMcpServer: () => McpServer;
  /**
   * Builds the witness's own MCP server (operator tools, never the model-facing ones), served
   * statelessly at `/witness`; absent → `/witness` is a 404.
   */
  createWitnessServer?: () => McpServer;
  didDocument: DidDocument;
  host: string;
  port: number;
  /** Extra Host header names to accept besides loopback (e.g. the compose service name). */
  allowedHostnames?: readonly string[];
  /** Session caps and idle expiry; defaults in `DEFAULT_SESSION_LIMITS`. */
  sessionLimits?: Partial<SessionLimits>;
  /** Clock in milliseconds for idle expiry (tests move it; default `Date.now`). */
  now?: () => number;
  log?: (event: string, fields: Record<string, unknown>) => void;
};

/** A running HTTP server: its base URL and how to stop it. */
export type RunningHttpServer = { url: string; port: number; close(): Promise<void> };

const MAX_BODY_BYTES = 1_000_000;

/**
 * Serve the shop over Streamable HTTP at `/mcp` (with sessions) and its DID document at
 * `/.well-known/did.json`. Every request's Host header is checked against loopback plus the
 * configured names first (DNS-rebinding protection for a server without authentication), then
 * its Origin, if any, must be the shop's own (no cross-site requests from a browser page).
 * Sessions expire when idle and are capped globally and per remote address, so one client can
 * neither hold every session nor evict anyone else's (issue 11).
 */
export async function startHttpServer(options: HttpServerOptions): Promise<RunningHttpServer> {
  const log = options.log ?? (() => {});
  const allowed = new Set(
    ['localhost', '127.0.0.1', '[::1]', ...(options.allowedHostnames ?? [])].map((name) => name.toLowerCase()),
  );
  if (!['0.0.0.0', '::'].includes(options.host))
    allowed.add(options.host.includes(':') ? `[${options.host}]` : options.host);
  const limits: SessionLimits = { ...DEFAULT_SESSION_LIMITS, ...options.sessionLimits };
  const sessions = createSessionTable<NodeStreamableHTTPServerTransport>({
    limits,
    now: options.now ?? Date.now,
    onEvicted: (entry, why) => log('session-evicted', { why, address: entry.address }),
  });
  // Idle sessions also go without traffic: a periodic sweep that never keeps the process alive.
  const sweeper = setInterval(() => sessions.sweep(), Math.min(limits.idleTimeoutMs, 60_000));
  sweeper.unref();

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
    if (path === '/witness' && options.createWitnessServer !== undefined) {
      return serveStateless(options.createWitnessServer, request, response);
    }
    if (path !== '/mcp') return sendJson(response, 404, { error: 'not found' });

    // Step 3: route to the session's transport, or open a session on `initialize`. Expired
    // sessions are closed first, so a request for one is told the session is gone.
    sessions.sweep();
    const sessionId = request.headers['mcp-session-id'];
    const existing = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
    // While a request (an SSE stream included) is open, its session is busy, not idle.
    const busy = (entry: NonNullable<typeof existing>) => response.once('close', sessions.begin(entry));
    if (request.method !== 'POST') {
      if (existing === undefined) return sendJson(response, 404, rpcError('Unknown or missing MCP session'));
      busy(existing);
      return existing.session.handleRequest(request, response);
    }
    const body = await readJson(request);
    if (!body.ok) return sendJson(response, body.status, rpcError(body.message));
    if (existing !== undefined) {
      busy(existing);
      return existing.session.handleRequest(request, response, body.value);
    }
    if (sessionId !== undefined) return sendJson(response, 404, rpcError('Unknown MCP session'));
    if (!isInitializeRequest(body.value)) return sendJson(response, 400, rpcError('Start a session with initialize'));

    // Step 4: admit the new session within the caps (room is made only from idle sessions).
    const address = remoteAddressOf(request);
    let registerId: (id: string) => void = () => {};
    const transport = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => registerId(id),
    });
    const admission = sessions.admit(address, transport, () => transport.close());
    if (!admission.ok) {
      log('session-refused', { address, status: admission.status });
      return sendJson(response, admission.status, rpcError(admission.message));
    }
    const entry = admission.entry;
    registerId = (id) => {
      sessions.register(entry, id);
      // An operator sees the household connect (`docker compose logs shop`), and a test can wait on it.
      log('session-opened', { address });
    };
    transport.onclose = () => sessions.remove(entry);
    busy(entry);
    await options.createMcpServer().connect(transport);
    await transport.handleRequest(request, response, body.value);
    // An initialize the transport rejected opened no session: free its place.
    if (transport.sessionId === undefined) {
      sessions.remove(entry);
      await transport.close();
    }
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
      clearInterval(sweeper);
      await Promise.all(sessions.all().map((entry) => entry.close()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * One request to a stateless MCP endpoint (the witness): a fresh server and transport per POST, no
 * session to hold or evict. The Host and Origin checks have already run.
 */
async function serveStateless(
  createServer: () => McpServer,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  if (request.method !== 'POST') return sendJson(response, 405, rpcError('Method not allowed'));
  const body = await readJson(request);
  if (!body.ok) return sendJson(response, body.status, rpcError(body.message));
  const transport = new NodeStreamableHTTPServerTransport({ enableJsonResponse: true });
  const server = createServer();
  response.once('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(request, response, body.value);
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
