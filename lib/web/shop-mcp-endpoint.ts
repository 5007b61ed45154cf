import {
  checkInboundTokens,
  createSessionHttpHandler,
  createStatelessLeg,
  type HttpHandler,
  type InboundToken,
} from '../../proxy/index';
import type { TransparentShop } from '../transparent-shop';
import { allowedHost } from './host-rule';
import type { McpEndpoint } from './mcp-endpoint';

/** The path of the transparent shop endpoint, beside `/mcp`. */
export const shopMcpPath = '/mcp/pizza';

/** What {@link createShopMcpEndpoint} needs. */
export interface ShopMcpEndpointOptions {
  /** The household's shop served transparently; absent (an in-process shop) → the endpoint does not exist. */
  readonly shop: TransparentShop | undefined;
  /** The app's origin: its host is the one `Host` accepted, itself the one browser `Origin`. */
  readonly origin: string;
  /** The same named bearer tokens as `/mcp`; none → the endpoint does not exist. */
  readonly tokens: readonly InboundToken[];
}

/**
 * Sessions at once, each with its own connection to the shop (a stdio shop is one child process
 * per session): the transparent CLI's default, also per address.
 */
const maxSessions = 16;

/**
 * Serves the household's shop transparently at `/mcp/pizza` (docs/human-authority.md): the shop's
 * own tool list, under the household's rules, to clients that hold one of `/mcp`'s tokens. A
 * 2025-11-25 client gets a session with a shop connection of its own; a 2026-07-28 request is
 * served statelessly over pooled connections. Host/Origin checks, body cap and session bounds are
 * the gateway's Streamable HTTP handler's; without a token it is a 404, as `/mcp` is.
 */
export function createShopMcpEndpoint(options: ShopMcpEndpointOptions): McpEndpoint {
  const { shop } = options;
  if (options.tokens.length === 0 || shop === undefined) {
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
      handler ??= createSessionHttpHandler(
        (transport, principal) => shop.open(principal).connect(transport),
        {
          // The same Host rule as every other route (the interceptor applies it first).
          allowedHosts: [allowedHost(options.origin)],
          allowedOrigins: [options.origin],
          path: shopMcpPath,
          inboundTokens,
          maxSessions,
          maxSessionsPerAddress: maxSessions,
        },
        createStatelessLeg((principal) => shop.serverFor(principal), { bus: shop.bus }),
      );
      return handler.handle(request);
    },
    async close() {
      await handler?.close();
    },
  };
}
