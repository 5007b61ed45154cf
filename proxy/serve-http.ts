import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { ExtensibleProxy } from './create-proxy';

/** Options of {@link serveHttp}. */
export interface ServeHttpOptions {
  /** Interface to bind; default 127.0.0.1. */
  readonly host?: string;
  /** Port; 0 picks a free one. */
  readonly port?: number;
  /** Extra `Host` header values to accept (beyond the bound host and localhost). */
  readonly allowedHosts?: readonly string[];
  /** Largest request body accepted, in bytes. */
  readonly maxBodyBytes?: number;
}

/** A running Streamable HTTP endpoint. */
export interface HttpEndpoint {
  /** `http://host:port/mcp`. */
  readonly url: string;
  close(): Promise<void>;
}

function reject(response: ServerResponse, status: number, message: string): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

async function readJson(
  request: IncomingMessage,
  limit: number,
): Promise<{ ok: true; body: unknown } | { ok: false; status: number; message: string }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > limit) return { ok: false, status: 413, message: `Request body larger than ${limit} bytes.` };
    chunks.push(chunk as Buffer);
  }
  try {
    return { ok: true, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
  } catch {
    return { ok: false, status: 400, message: 'Parse error: the body is not valid JSON.' };
  }
}

/**
 * Serves the proxy over Streamable HTTP at `/mcp`, one MCP session (and one discovery set) per
 * `Mcp-Session-Id`. Binds to 127.0.0.1 by default and checks `Host` and `Origin` against the
 * bound address, so a web page cannot reach it through DNS rebinding.
 */
export async function serveHttp(proxy: ExtensibleProxy, options: ServeHttpOptions = {}): Promise<HttpEndpoint> {
  const host = options.host ?? '127.0.0.1';
  const limit = options.maxBodyBytes ?? 4 * 1024 * 1024;
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  let allowedHosts: string[] = [];
  let allowedOrigins: string[] = [];

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = new URL(request.url ?? '/', 'http://placeholder').pathname;
    if (path !== '/mcp') return reject(response, 404, 'Not found: the MCP endpoint is /mcp.');
    const sessionId = request.headers['mcp-session-id'];
    const existing = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
    if (request.method !== 'POST') {
      if (!existing) return reject(response, 400, 'Bad request: unknown or missing Mcp-Session-Id.');
      return existing.handleRequest(request, response);
    }
    const parsed = await readJson(request, limit);
    if (!parsed.ok) return reject(response, parsed.status, parsed.message);
    if (existing) return existing.handleRequest(request, response, parsed.body);
    if (sessionId !== undefined || !isInitializeRequest(parsed.body)) {
      return reject(
        response,
        sessionId === undefined ? 400 : 404,
        'Bad request: start a session with an initialize request.',
      );
    }
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableDnsRebindingProtection: true,
      allowedHosts,
      allowedOrigins,
      onsessioninitialized: (id) => {
        sessions.set(id, transport);
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await proxy.createServer().connect(transport);
    await transport.handleRequest(request, response, parsed.body);
  }

  const server = createServer((request, response) => {
    handle(request, response).catch(() => {
      if (!response.headersSent) reject(response, 500, 'Internal error.');
      else response.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  const hostNames = new Set([host.includes(':') ? `[${host}]` : host, 'localhost', '127.0.0.1', '[::1]']);
  allowedHosts = [...[...hostNames].map((name) => `${name}:${port}`), ...(options.allowedHosts ?? [])];
  allowedOrigins = [...hostNames].map((name) => `http://${name}:${port}`);
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/mcp`,
    async close() {
      await Promise.allSettled([...sessions.values()].map((transport) => transport.close()));
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
