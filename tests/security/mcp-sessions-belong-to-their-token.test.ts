/**
 * Issue 26 item 13: anyone holding `/mcp`'s bearer token could join another client's session by
 * its id, and the log served those ids. `/mcp` now takes several named tokens; a session belongs
 * to the token that opened it, and another token's request for it is answered exactly as for an
 * unknown session. Driven through the app's own endpoint with web `Request`s, as Next.js hands them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createMcpEndpoint, type McpEndpoint } from '../../lib/web/mcp-endpoint';
import { createGateway, type Gateway } from '../../proxy/index';

const origin = 'http://localhost:3000';
const alice = { name: 'alice', token: 'alice-token-0123456789abcdef' };
const bob = { name: 'bob', token: 'bob-token-0123456789abcdefgh' };

let gateway: Gateway | undefined;
let endpoint: McpEndpoint | undefined;
afterEach(async () => {
  await endpoint?.close();
  await gateway?.close();
});

function post(body: unknown, headers: Record<string, string>): Request {
  return new Request(`${origin}/mcp`, {
    method: 'POST',
    headers: {
      host: 'localhost:3000',
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify(body),
  });
}

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'external', version: '1' } },
};

describe('/mcp with several named tokens', () => {
  it('a session opened with one token opens nothing for another', async () => {
    gateway = createGateway({ embeddings: false, logger: { info: () => undefined, error: () => undefined } });
    endpoint = createMcpEndpoint({ gateway, origin, tokens: [alice, bob] });
    const opened = await endpoint.handle(post(initialize, { authorization: `Bearer ${alice.token}` }));
    expect(opened.status).toBe(200);
    await opened.text();
    const session = opened.headers.get('mcp-session-id') ?? '';
    expect(session).toMatch(/.+/);
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} };
    const session2025 = { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' };

    const asBob = await endpoint.handle(post(list, { authorization: `Bearer ${bob.token}`, ...session2025 }));
    expect(asBob.status).toBe(404);
    const unknown = await endpoint.handle(
      post(list, { authorization: `Bearer ${bob.token}`, ...session2025, 'mcp-session-id': 'no-such-session' }),
    );
    // Answered exactly as for an unknown session: the id tells Bob nothing.
    expect(await asBob.json()).toEqual(await unknown.json());

    const asAlice = await endpoint.handle(post(list, { authorization: `Bearer ${alice.token}`, ...session2025 }));
    expect(asAlice.status).toBe(200);
    expect(await asAlice.text()).toContain('search_tools');
  });
});
