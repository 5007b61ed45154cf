import type { IdentityHandlers } from '../../identity/index';
import { getHouseholdApp, type HouseholdApp } from './household-app';
import { AppHttpError, respond } from './http';

/** A web-standard route handler, as Next.js mounts it. */
export type RouteHandler = (request: Request) => Promise<Response>;

/**
 * Wraps a route's body: the process's household app handed in, and every error translated to
 * HTTP in {@link respond}. A household that did not start is a 503 in words, not a stack.
 */
export function appRoute(body: (request: Request, app: HouseholdApp) => Promise<Response>): RouteHandler {
  return (request) =>
    respond(async () => {
      let app: HouseholdApp;
      try {
        app = await getHouseholdApp();
      } catch (error) {
        console.error('the household did not start', error);
        throw new AppHttpError(503, 'the household did not start; the server terminal says why');
      }
      return body(request, app);
    });
}

/** Mounts one of identity's handlers (`createIdentityHandlers`): they do their own Origin, body and session checks. */
export function identityRoute(name: keyof IdentityHandlers): RouteHandler {
  return appRoute((request, app) => app.identity[name](request));
}

/** Mounts the embedded proxy's Streamable HTTP endpoint (404 unless a token is configured). */
export const mcpRoute: RouteHandler = appRoute((request, app) => app.mcp.handle(request));

/** Mounts the household's shop served transparently, gated by the household (404 unless a token is configured). */
export const shopMcpRoute: RouteHandler = appRoute((request, app) => app.shopMcp.handle(request));
