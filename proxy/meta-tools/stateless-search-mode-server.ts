import { type CallToolResult, createMcpHandler, type McpHttpHandler, Server } from '@modelcontextprotocol/server';
import type { Gateway, Principal } from '../gateway/types';
import { answerMetaTool, metaTools, searchModeInstructions } from './search-mode-server';

/**
 * The search-mode face for a 2026-07-28 (sessionless) request, on the v2 SDK (SPEC §3.11): the
 * same three meta-tools, each call made as `principal` in a handle scope, so `search_tools`
 * returns the handle that `call_tool` passes back (SPEC §3.5, docs/protocol.md). Built afresh for
 * every request: nothing lives between requests but what the discovery store keeps.
 */
export function createStatelessSearchModeServer(gateway: Gateway, principal: Principal): Server {
  const server = new Server(
    { name: 'extensible-mcp', version: '0.1.0' },
    { capabilities: { tools: {} }, instructions: searchModeInstructions },
  );
  server.setRequestHandler('tools/list', () => ({ tools: metaTools as never }));
  server.setRequestHandler(
    'tools/call',
    async (request, context): Promise<CallToolResult> =>
      (await answerMetaTool(gateway, request.params, {
        principal,
        scope: { kind: 'handle' },
        signal: context.mcpReq.signal,
      })) as CallToolResult,
  );
  return server;
}

/** Serves a 2026-07-28 request as `principal` (its POST body already read and parsed): the HTTP face's stateless leg. */
export interface StatelessLeg {
  handle(request: Request, principal: Principal, parsedBody: unknown): Promise<Response>;
  close(): Promise<void>;
}

/**
 * The stateless Streamable HTTP leg for 2026-07-28 requests: the SDK's handler, modern-only
 * (`legacy: 'reject'`, since 2025 requests go to the sessionful leg), with the principal the face
 * authenticated handed through as the request's `authInfo`.
 */
export function createStatelessHandler(gateway: Gateway): StatelessLeg {
  const handler: McpHttpHandler = createMcpHandler(
    ({ authInfo }) => {
      // The face always hands the principal through; a request without one is served to no one.
      if (authInfo === undefined) throw new Error('a stateless request reached the handler without its principal');
      return createStatelessSearchModeServer(gateway, { id: authInfo.clientId });
    },
    { legacy: 'reject' },
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
