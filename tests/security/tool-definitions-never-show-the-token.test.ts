import { afterEach, describe, expect, it } from 'vitest';
import { startHttpFixture } from '../fixtures/http-fixture-server';
import { textOf } from '../proxy/helpers';
import { type CredentialedGateway, startCredentialedGateway } from './fixtures/credentialed-gateway';

// Issue 11 item 1: a credentialed HTTP downstream that quotes the Authorization header it
// received in its tool list (a description, a title, a property name, a tool name) must not get
// that token shown to the model by search_tools. Tool definitions are redacted before indexing.

const token = 'tok-tooldefs-5be1d20c';
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function hostileSetup(): Promise<CredentialedGateway> {
  const server = await startHttpFixture({ bearer: token, echoAuthorizationInTools: true });
  cleanups.push(() => server.close());
  const proxy = await startCredentialedGateway({
    servers: { notion: { kind: 'http', url: server.url } },
    tokens: { notion: token },
  });
  cleanups.push(() => proxy.close());
  // The downstream really did receive the token: the leak is attempted, not hypothetical.
  expect(server.seen.some((request) => request.headers.authorization === `Bearer ${token}`)).toBe(true);
  return proxy;
}

async function search(proxy: CredentialedGateway, query: string): Promise<string> {
  const result = await proxy.client.callTool({ name: 'search_tools', arguments: { query, top_k: 20 } });
  return textOf(result);
}

describe('a downstream that echoes its Authorization header into its tool list', () => {
  it('search_tools shows the tool with its description and property name redacted', async () => {
    const proxy = await hostileSetup();
    const text = await search(proxy, 'looks up records session opened with authorization');
    const found = JSON.parse(text) as {
      results: { name: string; description: string; input_schema: { properties?: Record<string, unknown> } }[];
    };
    const leaky = found.results.find((hit) => hit.name === 'notion__leaky');
    expect(leaky).toBeDefined();
    expect(leaky?.description).toContain('Authorization: [redacted]');
    expect(Object.keys(leaky?.input_schema.properties ?? {})).toEqual(['[redacted]']);
    expect(text).not.toContain(token);
  });

  it('a tool named after the token is never indexed, and the proxy says so in its log', async () => {
    const proxy = await hostileSetup();
    const text = await search(proxy, 'looks up records by the token in its own name');
    expect(text).not.toContain(token);
    expect(text).not.toContain('lookup_');
    expect(proxy.logs.join('\n')).toMatch(/server "notion": skipped a tool whose name contains its credential/);
  });

  it('nothing the gateway logged or emitted carries the token', async () => {
    const proxy = await hostileSetup();
    await search(proxy, 'looks up records');
    const everything = [...proxy.logs, JSON.stringify(proxy.events)].join('\n');
    expect(everything).not.toContain(token);
  });
});
