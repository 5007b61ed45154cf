import {
  checkInboundTokens,
  createHttpHandler,
  type Gateway,
  type HttpHandler,
  type InboundToken,
} from '../../proxy/index';
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
  /** The clients' named bearer tokens (`EXTENSIBLE_MCP_HTTP_TOKEN`, `…_TOKENS`); none → the endpoint does not exist. */
  readonly tokens: readonly InboundToken[];
}

/**
 * Mounts the gateway's web-standard Streamable HTTP handler behind named bearer tokens (SPEC
 * §3.5, §8). Without a configured token it is a 404, so an app started without one exposes no MCP
 * surface at all. The handler compares tokens in constant time, names each client's principal by
 * its token, binds each session to that principal, and keeps its Host/Origin checks and body cap.
 */
export function createMcpEndpoint(options: McpEndpointOptions): McpEndpoint {
  if (options.tokens.length === 0) {
    return {
      enabled: false,
      handle: async () => Response.json({ error: 'not found' }, { status: 404 }),
      close: async () => undefined,
    };
  }
  const inboundTokens = checkInboundTokens(options.tokens, 'the /mcp tokens');
  let handler: HttpHandler | undefined;
  return {
    enabled: true,
    async handle(request) {
      handler ??= createHttpHandler(options.gateway, {
        // The same Host rule as every other route (the interceptor applies it first).
        allowedHosts: [allowedHost(options.origin)],
        allowedOrigins: [options.origin],
        path: '/mcp',
        inboundTokens,
      });
      return handler.handle(request);
    },
    async close() {
      await handler?.close();
    },
  };
}
