/**
 * Issue 31: change notifications reach 2026-07-28 clients on their `subscriptions/listen` stream.
 * A transparent proxy's 2026 face over loopback HTTP, its upstreams real SDK servers linked in
 * memory: when the upstream announces `tools/list_changed`, a listening client hears it and
 * lists the new tool.
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { InMemoryServerEventBus, InMemoryTransport, McpServer } from '@modelcontextprotocol/server';
import { afterEach, expect, it } from 'vitest';
import { z } from 'zod';
import { serveSessions } from '../../proxy/http/serve-http';
import { createStatelessLeg } from '../../proxy/meta-tools/stateless-search-mode-server';
import { createTransparentRequests } from '../../proxy/transparent/transparent-requests';
import { cleanupStack } from '../gateway/support';
import { configFrom } from './helpers';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

it('a listening 2026 client hears the upstream tools/list_changed and lists the new tool', async () => {
  const upstreams: McpServer[] = [];
  const bus = new InMemoryServerEventBus();
  const requests = createTransparentRequests({
    config: configFrom({ upstream: { url: 'http://upstream.invalid/mcp' } }),
    bus,
    upstreamTransport: async () => {
      const server = new McpServer(
        { name: 'changing', version: '1.0.0' },
        { capabilities: { tools: { listChanged: true } } },
      );
      server.registerTool('first', { description: 'The first tool', inputSchema: z.object({}) }, () => ({
        content: [{ type: 'text', text: 'first' }],
      }));
      upstreams.push(server);
      const [client, serverSide] = InMemoryTransport.createLinkedPair();
      await server.connect(serverSide);
      return client;
    },
  });
  cleanups.push(() => requests.close());
  const endpoint = await serveSessions(
    async () => {
      throw new Error('2025 sessions are not under test');
    },
    {},
    createStatelessLeg((principal) => requests.serverFor(principal), { bus }),
  );
  cleanups.push(() => endpoint.close());

  const client = new Client(
    { name: 'listener', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(endpoint.url)));
  cleanups.push(() => client.close());
  expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['first']);
  const changed = new Promise<void>((resolve) => {
    client.setNotificationHandler('notifications/tools/list_changed', () => resolve());
  });
  const subscription = await client.listen({ toolsListChanged: true });
  cleanups.push(() => subscription.close());
  expect(subscription.honoredFilter).toMatchObject({ toolsListChanged: true });

  for (const upstream of upstreams) {
    upstream.registerTool('second', { description: 'A tool added later', inputSchema: z.object({}) }, () => ({
      content: [{ type: 'text', text: 'second' }],
    }));
    upstream.sendToolListChanged();
  }
  await changed;
  expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(['first', 'second']);
  const result = await client.callTool({ name: 'second', arguments: {} });
  expect(result.content).toEqual([{ type: 'text', text: 'second' }]);
});
