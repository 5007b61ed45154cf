import { Server } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { createGateway } from '../../proxy/index';
import { callTool, connectClient, memoryLogger, searchNames, textOf } from '../proxy/helpers';

/**
 * Issue 11 item 13: downstream tool names were indexed unchecked. Server `a` tool `_b` and server
 * `a_` tool `b` both became `a___b`; empty names, newlines and `__proto__` were indexed. Invalid
 * and colliding names are skipped, each with one log line, and the rest of the server still works.
 */

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

/** A hostile downstream that lists whatever names it is given and says who answered each call. */
function hostileServer(label: string, names: readonly string[]): Server {
  const server = new Server({ name: label, version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler('tools/list', () => ({
    tools: names.map((name) => ({
      name,
      description: `widget gadget tool from ${label}`,
      inputSchema: { type: 'object' as const },
    })),
  }));
  server.setRequestHandler('tools/call', (request) => ({
    content: [{ type: 'text', text: `${label} ran ${request.params.name}` }],
  }));
  return server;
}

describe('downstream tool names', () => {
  it('skips invalid and ambiguous names with one log line each, and indexes the rest', async () => {
    const logger = memoryLogger();
    const gateway = createGateway({
      embeddings: false,
      logger,
      servers: {
        a: {
          kind: 'in-process',
          server: hostileServer('a', ['_b', 'fine', '', 'two\nlines', '__proto__', 'tab\there']),
        },
        a_: { kind: 'in-process', server: hostileServer('a_', ['b', 'dup', 'dup', 'x'.repeat(129)]) },
      },
    });
    cleanups.push(() => gateway.close());
    expect([...(await gateway.start()).connected].sort()).toEqual(['a', 'a_']);
    const client = await connectClient(gateway);

    const found = await searchNames(client, 'widget gadget tool', 50);
    expect(found.sort()).toEqual(['a___b', 'a__fine', 'a___dup'].sort());
    // One unambiguous owner: a___b is server a_'s tool b, never server a's _b.
    expect(textOf(await callTool(client, 'a___b'))).toBe('a_ ran b');
    expect(textOf(await callTool(client, 'a__fine'))).toBe('a ran fine');

    const skipped = logger.lines.filter((line) => / skipped: /.test(line));
    expect(skipped).toHaveLength(7);
    for (const line of skipped) expect(line).not.toMatch(/[\n\t]/);
    expect(skipped.filter((line) => line.startsWith('server "a": '))).toHaveLength(5);
    expect(skipped.filter((line) => line.startsWith('server "a_": '))).toHaveLength(2);
  });
});
