import { createMcpHandler, type McpHttpHandler, type Server, type ServerEventBus } from '@modelcontextprotocol/server';
import type { Gateway, Principal } from '../gateway/types';
import type { InputRounds } from './input-rounds';
import { createSearchModeServer } from './search-mode-server';

/** Serves a 2026-07-28 request as `principal` (its POST body already read and parsed): the HTTP face's stateless leg. */
export interface StatelessLeg {
  handle(request: Request, principal: Principal, parsedBody: unknown): Promise<Response>;
  close(): Promise<void>;
}

/**
 * The stateless Streamable HTTP leg for 2026-07-28 requests (SPEC §3.11): the SDK's handler,
 * modern-only (`legacy: 'reject'`, since 2025 requests go to the sessionful leg), building the
 * search-mode face afresh for every request with the principal the face authenticated handed
 * through as the request's `authInfo`. Nothing lives between requests but what the discovery
 * store keeps and what a request state carries (`rounds`, shared by replicas).
 */
export function createStatelessHandler(gateway: Gateway, rounds?: InputRounds): StatelessLeg {
  return createStatelessLeg((principal) =>
    createSearchModeServer(gateway, { principal, era: 'modern', ...(rounds !== undefined && { rounds }) }),
  );
}

/**
 * A stateless leg for any face (search or transparent mode): the SDK's handler, modern-only,
 * answering each request with the server `serverFor` builds for the request's principal.
 */
export function createStatelessLeg(
  serverFor: (principal: Principal) => Server | Promise<Server>,
  options: { readonly bus?: ServerEventBus } = {},
): StatelessLeg {
  const handler: McpHttpHandler = createMcpHandler(
    ({ authInfo }) => {
      // The face always hands the principal through; a request without one is served to no one.
      if (authInfo === undefined) throw new Error('a stateless request reached the handler without its principal');
      return serverFor({ id: authInfo.clientId });
    },
    // Change events reach the clients' `subscriptions/listen` streams through `bus` (SPEC §3.11).
    { legacy: 'reject', ...(options.bus !== undefined && { bus: options.bus }) },
  );
  return {
    handle: (request, principal, parsedBody) =>
      handler.fetch(request, {
        authInfo: { token: '', clientId: principal.id, scopes: [] },
        ...(parsedBody !== undefined && { parsedBody }),
      }),
    close: () => handler.close(),
  };
}
