import { createHash, timingSafeEqual } from 'node:crypto';
import { createHttpHandler, type Gateway, type HttpHandler } from '../../proxy/index';
import { allowedHost } from './host-rule';

/** The embedded proxy served to external MCP clients at `/mcp` (SPEC §8). */
export interface McpEndpoint {
  /** Whether a token is configured; without one the endpoint answers 404 to everything. */
  readonly enabled: boolean;
  handle(request: Request): Promise<Response>;
  close(): Promise<void>;
}

/** What {@link createMcpEndpoint} needs. */
export interface McpEndpointOptions {
  readonly gateway: Gateway;
  /** The app's origin: its host is the one `Host` accepted, itself the one browser `Origin`. */
  readonly origin: string;
  /** `EXTENSIBLE_MCP_HTTP_TOKEN`; absent → the endpoint does not exist. */
  readonly token?: string;
}

/**
 * Mounts the gateway's web-standard Streamable HTTP handler behind a bearer token. Without a
 * configured token it is a 404, so an app started without one exposes no MCP surface at all.
 * The token is compared in constant time (both sides hashed to equal length first); the
 * handler itself keeps its Host/Origin checks, body cap and per-session discovery gate.
 */
export function createMcpEndpoint(options: McpEndpointOptions): McpEndpoint {
  const { token } = options;
  if (token === undefined) {
    return {
      enabled: false,
      handle: async () => Response.json({ error: 'not found' }, { status: 404 }),
      close: async () => undefined,
    };
  }
  const expected = digest(token);
  let handler: HttpHandler | undefined;
  return {
    enabled: true,
    async handle(request) {
      if (!bearerMatches(request.headers.get('authorization'), expected)) {
        return Response.json(
          {
            jsonrpc: '2.0',
            error: { code: -32001, message: 'Unauthorized: a valid bearer token is required.' },
            id: null,
          },
          { status: 401, headers: { 'www-authenticate': 'Bearer realm="extensible-mcp"' } },
        );
      }
      handler ??= createHttpHandler(options.gateway, {
        // The same Host rule as every other route (the interceptor applies it first).
        allowedHosts: [allowedHost(options.origin)],
        allowedOrigins: [options.origin],
        path: '/mcp',
      });
      return handler.handle(request);
    },
    async close() {
      await handler?.close();
    },
  };
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** `Authorization: Bearer <token>` with the expected token, compared without leaking timing. */
function bearerMatches(header: string | null, expected: Buffer): boolean {
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header ?? '');
  // Always compare, even with nothing given, so the answer's timing says nothing either way.
  const given = digest(match?.[1] ?? '');
  return timingSafeEqual(given, expected) && match !== null;
}
