import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Gateway } from '../gateway/types';
import { localInputRounds } from '../meta-tools/input-rounds';
import { createSearchModeServer } from '../meta-tools/search-mode-server';
import { createStatelessHandler, type StatelessLeg } from '../meta-tools/stateless-search-mode-server';
import {
  type ConnectSession,
  createSessionHttpHandler,
  type HttpHandler,
  type HttpHandlerOptions,
} from './http-handler';

/** Options of {@link serveHttp}. */
export interface ServeHttpOptions extends Partial<Omit<HttpHandlerOptions, 'allowedHosts' | 'allowedOrigins'>> {
  /** Interface to bind; default 127.0.0.1. */
  readonly host?: string;
  /** Port; 0 picks a free one. */
  readonly port?: number;
  /** Extra `Host` header values to accept (beyond the bound host and localhost). */
  readonly allowedHosts?: readonly string[];
}

/** A running Streamable HTTP endpoint. */
export interface HttpEndpoint {
  /** `http://host:port/mcp`. */
  readonly url: string;
  /** Stops taking requests and lets those taken finish and be answered, for at most `timeoutMs` (see {@link HttpHandler.drain}). */
  drain(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * Node's request as a web `Request` with its method, URL and headers but no body: the handler
 * reads the body straight from Node's request (`HttpRequestContext.body`), once.
 */
function toRequest(request: IncomingMessage, origin: string): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else if (value !== undefined) headers.set(name, value);
  }
  return new Request(new URL(request.url ?? '/', origin), { method: request.method ?? 'GET', headers });
}

/** Writes a web `Response` to Node's, streaming SSE bodies until either side closes. */
async function writeResponse(response: Response, target: ServerResponse): Promise<void> {
  target.writeHead(response.status, Object.fromEntries(response.headers));
  if (!response.body) {
    target.end();
    return;
  }
  const reader = response.body.getReader();
  target.once('close', () => void reader.cancel().catch(() => undefined));
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) target.write(chunk.value);
  target.end();
}

/**
 * Serves the gateway over Streamable HTTP at `/mcp` through Node's `http` server: a thin adapter
 * over {@link createHttpHandler}. Binds to 127.0.0.1 by default; `Host` and `Origin` must name the
 * bound address (or an extra allowed host).
 */
export function serveHttp(gateway: Gateway, options: ServeHttpOptions = {}): Promise<HttpEndpoint> {
  const rounds = options.rounds ?? localInputRounds();
  return serveSessions(
    (transport, principal) => createSearchModeServer(gateway, { principal, rounds }).connect(transport),
    options,
    createStatelessHandler(gateway, rounds),
  );
}

/**
 * Serves one session per client at `/mcp` through Node's `http` server, as {@link serveHttp}
 * does, with `connectSession` serving each new session (transparent mode's proxy per client).
 */
export async function serveSessions(
  connectSession: ConnectSession,
  options: ServeHttpOptions = {},
  stateless?: StatelessLeg,
): Promise<HttpEndpoint> {
  const host = options.host ?? '127.0.0.1';
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  const names = new Set([host.includes(':') ? `[${host}]` : host, 'localhost', '127.0.0.1', '[::1]']);
  const handler = createSessionHttpHandler(
    connectSession,
    {
      ...options,
      allowedHosts: [...[...names].map((name) => `${name}:${port}`), ...(options.allowedHosts ?? [])],
      allowedOrigins: [...names].map((name) => `http://${name}:${port}`),
    },
    stateless,
  );
  const origin = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    handler
      .handle(toRequest(request, origin), {
        body: request,
        // The per-address session cap keys on the peer as the socket saw it (never on a header).
        ...(request.socket.remoteAddress !== undefined && { remoteAddress: request.socket.remoteAddress }),
      })
      .then((answer) => writeResponse(answer, response))
      .catch(() => {
        if (!response.headersSent) {
          response.writeHead(500, { 'content-type': 'application/json' });
          response.end(
            JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal error.' }, id: null }),
          );
        } else response.end();
      });
  });
  return {
    url: `${origin}/mcp`,
    drain: (timeoutMs) => handler.drain(timeoutMs),
    async close() {
      await handler.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
