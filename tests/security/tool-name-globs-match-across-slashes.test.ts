import type { Tool } from '@modelcontextprotocol/server';
import { Server } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { createGateway, type Gateway, type GatewayOptions, hideTools } from '../../proxy/index';
import { callTool, connectClient, memoryLogger, searchNames, textOf } from '../proxy/helpers';

// Issue 11 item 10: a deny glob like `*__delete_*` must hide `srv__delete_a/b`. Tool names are
// not paths: picomatch's `*` stops at `/`, so a downstream could dodge every deny pattern by
// putting a slash in a tool's name.

const TOOLS: Tool[] = [
  {
    name: 'delete_a/b',
    description: 'Delete every record in the archive',
    inputSchema: { type: 'object', properties: {} },
  },
  {
    name: 'list_records',
    description: 'List records in the archive',
    inputSchema: { type: 'object', properties: {} },
  },
];

/** An in-process downstream that lists a tool with a slash in its name and records every call. */
function archiveServer(calls: string[]): Server {
  const server = new Server({ name: 'archive', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler('tools/list', () => ({ tools: TOOLS }));
  server.setRequestHandler('tools/call', (request) => {
    calls.push(request.params.name);
    return { content: [{ type: 'text', text: `ran ${request.params.name}` }] };
  });
  return server;
}

const gateways: Gateway[] = [];
afterEach(async () => {
  await Promise.all(gateways.splice(0).map((gateway) => gateway.close()));
});

async function start(options: Partial<GatewayOptions>) {
  const calls: string[] = [];
  const gateway = createGateway({
    servers: { srv: { kind: 'in-process', server: archiveServer(calls) } },
    embeddings: false,
    logger: memoryLogger(),
    ...options,
  });
  gateways.push(gateway);
  const report = await gateway.start();
  expect(report.failed).toEqual([]);
  return { client: await connectClient(gateway), calls };
}

describe('tool-name globs treat "/" as an ordinary character', () => {
  it.each(['*__delete_*', 'srv__*_a*', 'srv__delete_?/b', 'srv__delete_a?b', '*b'])(
    'access control deny pattern %s hides srv__delete_a/b from search and refuses it by exact name',
    async (pattern) => {
      const { client, calls } = await start({ accessControl: { denyPatterns: [pattern] } });
      const names = await searchNames(client, 'delete records archive', 10);
      expect(names).toContain('srv__list_records');
      expect(names).not.toContain('srv__delete_a/b');

      const result = await callTool(client, 'srv__delete_a/b');
      expect(result.isError).toBe(true);
      expect(textOf(result)).not.toContain('ran ');
      expect(calls).toEqual([]);
    },
  );

  it('a hideTools pattern hides srv__delete_a/b, so the discovery gate refuses it too', async () => {
    const { client, calls } = await start({ extraSearchFilters: [hideTools({ patterns: ['*__delete_*'] })] });
    const names = await searchNames(client, 'delete records archive', 10);
    expect(names).toContain('srv__list_records');
    expect(names).not.toContain('srv__delete_a/b');

    const result = await callTool(client, 'srv__delete_a/b');
    expect(result.isError).toBe(true);
    expect(calls).toEqual([]);
  });

  it('still leaves tools no pattern names visible and callable', async () => {
    const { client, calls } = await start({ accessControl: { denyPatterns: ['*__delete_*'] } });
    await searchNames(client, 'list records archive', 10);
    const result = await callTool(client, 'srv__list_records');
    expect(result.isError).not.toBe(true);
    expect(calls).toEqual(['list_records']);
  });
});
