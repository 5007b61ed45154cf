import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { DidDocument } from './did-document.js';
import { ShopError } from './shop-error.js';

/** Options for the shop's Streamable HTTP endpoint. */
export type HttpServerOptions = {
  /** Builds one MCP server per session (an McpServer serves one transport). */
  createMcpServer: () => McpServer;
  didDocument: DidDocument;
  host: string;
  port: number;
  /** Extra Host header names to accept besides loopback (e.g. the compose service name). */
  allowedHostnames?: readonly string[];
  log?: (event: string, fields: Record<string, unknown>) => void;
};

/** A running HTTP server: its base URL and how to stop it. */
export type RunningHttpServer = { url: string; port: number; close(): Promise<void> };

const MAX_BODY_BYTES = 1_000_000;
const MAX_SESSIONS = 1_000;

/**
 * Serve the shop over Streamable HTTP at `/mcp` (with sessions) and its DID document at
 * `/.well-known/did.json`. Every request's Host header is checked against loopback plus the
 * configured names first: DNS-rebinding protection for a server without authentication.
 */
export async function startHttpServer(options: HttpServerOptions): Promise<RunningHttpServer> {
  const log = options.log ?? (() => {});
  const allowed = new Set(
    ['localhost', '127.0.0.1', '[::1]', ...(options.allowedHostnames ?? [])].map((name) => name.toLowerCase()),
  );
  if (!['0.0.0.0', '::'].includes(options.host))
    allowed.add(options.host.includes(':') ? `[${options.host}]` : options.host);
  const sessions = new Map<string, StreamableHTTPServerTransport>();

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    // Step 1: DNS-rebinding protection: a foreign Host never reaches a handler.
    const hostname = hostnameOf(request.headers.host);
    if (hostname === null || !allowed.has(hostname)) {
      log('host-rejected', { host: (request.headers.host ?? '').slice(0, 100) });
      return sendJson(response, 403, rpcError(`Invalid Host header: ${(request.headers.host ?? '').slice(0, 100)}`));
    }
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    if (path === '/.well-known/did.json' && request.method === 'GET')
      return sendJson(response, 200, options.didDocument);
    if (path === '/healthz' && request.method === 'GET') return sendJson(response, 200, { ok: true });
    if (path !== '/mcp') return sendJson(response, 404, { error: 'not found' });

    // Step 2: route to the session's transport, or open a session on `initialize`.
    const sessionId = request.headers['mcp-session-id'];
    const existing = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
    if (request.method !== 'POST') {
      if (existing === undefined) return sendJson(response, 404, rpcError('Unknown or missing MCP session'));
      return existing.handleRequest(request, response);
    }
    const body = await readJson(request);
    if (!body.ok) return sendJson(response, body.status, rpcError(body.message));
    if (existing !== undefined) return existing.handleRequest(request, response, body.value);
    if (sessionId !== undefined) return sendJson(response, 404, rpcError('Unknown MCP session'));
    if (!isInitializeRequest(body.value)) return sendJson(response, 400, rpcError('Start a session with initialize'));
    if (sessions.size >= MAX_SESSIONS) return sendJson(response, 503, rpcError('Too many sessions'));

    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, transport);
      },
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    await options.createMcpServer().connect(transport);
    await transport.handleRequest(request, response, body.value);
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
      await Promise.all([...sessions.values()].map((transport) => transport.close()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
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
