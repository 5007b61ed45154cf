import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { type NodeIncomingMessageLike, toNodeHandler } from '@modelcontextprotocol/node';
import { type CallToolResult, createMcpHandler, Server } from '@modelcontextprotocol/server';

/**
 * The transport bench's floor (issue 31): the cheapest forwarder the SDK allows, to read the
 * proxy's ratio against what any MCP hop costs. A low-level SDK server with one `echo` tool that
 * forwards each call to the downstream over one shared v2 client, served by the SDK's own handler
 * with no session (`legacy: 'stateless'`: a 2025 client is answered per request, a 2026 one as the
 * protocol says). No search, no validation, no policy, no events.
 * `npx tsx tests/bench/floor-forwarder.ts <downstream URL> <2025-11-25 | 2026-07-28>`.
 */
const [downstreamUrl = '', version = '2025-11-25'] = process.argv.slice(2);
const downstream = new Client(
  { name: 'bench-floor', version: '1' },
  version === '2026-07-28' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {},
);
await downstream.connect(new StreamableHTTPClientTransport(new URL(downstreamUrl)));

const echo = {
  name: 'echo',
  description: 'Echoes back the message it is given',
  inputSchema: { type: 'object' as const, properties: { message: { type: 'string' } }, required: ['message'] },
};
const handler = createMcpHandler(
  () => {
    const server = new Server({ name: 'bench-floor', version: '1' }, { capabilities: { tools: {} } });
    server.setRequestHandler('tools/list', () => ({ tools: [echo] }));
    server.setRequestHandler(
      'tools/call',
      async (request) => (await downstream.callTool(request.params)) as CallToolResult,
    );
    return server;
  },
  { legacy: 'stateless' },
);
const node = toNodeHandler(handler);
const server = createServer((request, response) => void node(request as NodeIncomingMessageLike, response));
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stderr.write(`floor forwarder at http://127.0.0.1:${port}/mcp\n`);
});
