/**
 * Issue 18, search mode: the operator's downstreams are declared elicitation, sampling and roots
 * so they can ask the calling session; a server the model loaded with `load_mcp_server` is
 * untrusted and is declared none of them, so it cannot reach the user's forms or model at all.
 * A real Streamable HTTP server on loopback records the capabilities each connection declared.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import type { ClientCapabilities } from '@modelcontextprotocol/server';
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupStack, startedGateway, waitableLogger } from '../gateway/support';
import { connectClient } from '../proxy/helpers';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

/** A Streamable HTTP MCP server that records what each new session's client declared. */
async function recordingServer() {
  const declared: ClientCapabilities[] = [];
  const transports = new Map<string, NodeStreamableHTTPServerTransport>();
  const http = createServer((request, response) => {
    const id = request.headers['mcp-session-id'];
    const existing = typeof id === 'string' ? transports.get(id) : undefined;
    if (existing) {
      void existing.handleRequest(request, response);
      return;
    }
    const server = new McpServer({ name: 'recorder', version: '1.0.0' });
    server.registerTool('noop', { description: 'Does nothing' }, () => ({ content: [] }));
    server.server.oninitialized = () => declared.push(server.server.getClientCapabilities() ?? {});
    const transport = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (session) => {
        transports.set(session, transport);
      },
    });
    void server.connect(transport).then(() => transport.handleRequest(request, response));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  );
  const { port } = http.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/mcp`, declared };
}

describe('runtime-loaded servers cannot ask the session anything', () => {
  it('declares elicitation, sampling and roots to a configured server and nothing to a runtime load', async () => {
    const recorder = await recordingServer();
    const gateway = await startedGateway(cleanups, {
      logger: waitableLogger(),
      allowLocalhostLoads: true,
      servers: { configured: { kind: 'http', url: recorder.url } },
    });
    expect(recorder.declared).toEqual([{ elicitation: { form: {} }, sampling: {}, roots: {} }]);
    const client = await connectClient(gateway);
    cleanups.push(() => client.close());
    const loaded = await client.callTool({
      name: 'load_mcp_server',
      arguments: { server_name: 'loaded', url: recorder.url },
    });
    expect(loaded.isError).toBeFalsy();
    expect(recorder.declared).toHaveLength(2);
    expect(recorder.declared[1]).toEqual({});
  });
});
