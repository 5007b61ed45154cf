import { afterEach, describe, expect, it } from 'vitest';
import { createGateway, type Gateway, hideTools } from '../../proxy/index';
import { createFixtureServer } from '../fixtures/fixture-server';
import { callTool, connectClient, eventLog, memoryLogger, searchNames, textOf } from './helpers';

const proxies: Gateway[] = [];
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
});

async function startProxy(options: Parameters<typeof createGateway>[0] = {}): Promise<Gateway> {
  const proxy = createGateway({
    servers: { fixture: { kind: 'in-process', server: createFixtureServer() } },
    embeddings: false,
    logger: memoryLogger(),
    ...options,
  });
  proxies.push(proxy);
  await proxy.start();
  return proxy;
}

describe('meta-tools', () => {
  it('lists exactly the three meta-tools', async () => {
    const client = await connectClient(await startProxy());
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(['search_tools', 'call_tool', 'load_mcp_server']);
  });

  it('search_tools declares an output schema and answers with matching structured content', async () => {
    const client = await connectClient(await startProxy());
    const { tools } = await client.listTools();
    const search = tools.find((tool) => tool.name === 'search_tools');
    expect(search?.outputSchema?.required).toEqual(['query', 'search_mode', 'results']);
    // The SDK client validates structuredContent against that schema, so a mismatch would throw here.
    const found = await client.callTool({ name: 'search_tools', arguments: { query: 'add two numbers' } });
    expect(found.structuredContent).toEqual(JSON.parse(textOf(found)));
    const none = await client.callTool({ name: 'search_tools', arguments: { query: 'zzzz qqqq' } });
    expect(none.structuredContent).toMatchObject({ query: 'zzzz qqqq', results: [] });
  });

  it('tells the model the workflow and never to ask for tokens in chat', async () => {
    const client = await connectClient(await startProxy());
    const instructions = client.getInstructions() ?? '';
    expect(instructions).toMatch(/search_tools/);
    expect(instructions).toMatch(/Never ask the user for a password, token or API key in chat/);
  });

  it('finds a tool, returns its schema, and calls it', async () => {
    const client = await connectClient(await startProxy());
    const result = await client.callTool({ name: 'search_tools', arguments: { query: 'add two numbers' } });
    const parsed = JSON.parse(textOf(result)) as { results: { name: string; input_schema: { required?: string[] } }[] };
    expect(parsed.results[0]?.name).toBe('fixture__add');
    expect(parsed.results[0]?.input_schema.required).toEqual(['a', 'b']);
    const sum = await callTool(client, 'fixture__add', { a: 2, b: 3 });
    expect(sum.isError).toBeUndefined();
    expect(sum.structuredContent).toEqual({ sum: 5 });
  });

  it('says so when nothing matches, and suggests rephrasing', async () => {
    const client = await connectClient(await startProxy());
    const result = await client.callTool({ name: 'search_tools', arguments: { query: 'zebra xylophone' } });
    expect(textOf(result)).toMatch(/No tools matched .*rephrasing/);
  });

  it('refuses a call without a prior search in the same session', async () => {
    const proxy = await startProxy();
    const client = await connectClient(proxy);
    const refused = await callTool(client, 'fixture__echo', { message: 'hi' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/not been discovered in this session.*search_tools/);
    // Another session's search does not count for this one.
    const other = await connectClient(proxy);
    expect(await searchNames(other, 'echo message')).toContain('fixture__echo');
    expect((await callTool(client, 'fixture__echo', { message: 'hi' })).isError).toBe(true);
    expect(textOf(await callTool(other, 'fixture__echo', { message: 'hi' }))).toBe('echo: hi');
  });

  it('answers logging/setLevel and logs a refused call as a warning, only at a level that lets it through', async () => {
    const client = await connectClient(await startProxy());
    const logged: unknown[] = [];
    client.setNotificationHandler('notifications/message', (notification) => {
      logged.push(notification.params);
    });
    await client.setLoggingLevel('error');
    await callTool(client, 'fixture__echo', { message: 'not searched' });
    await client.setLoggingLevel('warning');
    await callTool(client, 'fixture__add', { a: 1, b: 2 });
    // The notification travels before the result it is about, over the same ordered transport.
    expect(logged).toEqual([
      {
        level: 'warning',
        logger: 'extensible-mcp',
        data: expect.stringMatching(/"fixture__add" has not been discovered/),
      },
    ]);
  });

  it('only registers what search returned: a tool outside the top-k stays undiscovered', async () => {
    const client = await connectClient(await startProxy());
    const names = await searchNames(client, 'echo message', 1);
    expect(names).toEqual(['fixture__echo']);
    expect((await callTool(client, 'fixture__add', { a: 1, b: 1 })).isError).toBe(true);
  });

  it('clamps top_k of 0, -5 and 10 000 to 1..50', async () => {
    const localTools = Array.from({ length: 60 }, (_, index) => ({
      name: `widget_${index}`,
      description: `Widget tool number ${index} that manages widgets`,
      inputSchema: { type: 'object' as const },
      handler: () => ({ content: [] }),
    }));
    const client = await connectClient(await startProxy({ localTools }));
    expect(await searchNames(client, 'widgets', 0)).toHaveLength(1);
    expect(await searchNames(client, 'widgets', -5)).toHaveLength(1);
    expect(await searchNames(client, 'widgets', 10_000)).toHaveLength(50);
    expect(await searchNames(client, 'widgets')).toHaveLength(5);
  });

  it('rejects wrong argument types with a clear error', async () => {
    const client = await connectClient(await startProxy());
    const bad = await client.callTool({ name: 'search_tools', arguments: { query: 42 } });
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toMatch(/Invalid arguments for search_tools: query/);
    const badCall = await client.callTool({ name: 'call_tool', arguments: { tool_name: 'x', arguments: 'nope' } });
    expect(textOf(badCall)).toMatch(/Invalid arguments for call_tool: arguments/);
  });
});

describe('local tools', () => {
  const echoLocal = {
    name: 'local_echo',
    description: 'Repeats the words it is given, locally',
    inputSchema: { type: 'object' as const, properties: { words: { type: 'string' } } },
    handler: (args: Record<string, unknown>) => ({
      content: [{ type: 'text' as const, text: `local: ${String(args.words)}` }],
    }),
  };

  it('are searched and called through the same pipeline, discovery gate included', async () => {
    const client = await connectClient(await startProxy({ localTools: [echoLocal] }));
    expect((await callTool(client, 'local_echo', { words: 'x' })).isError).toBe(true);
    expect(await searchNames(client, 'repeat words locally')).toContain('local_echo');
    expect(textOf(await callTool(client, 'local_echo', { words: 'x' }))).toBe('local: x');
  });

  it('reject "__" in their names', () => {
    expect(() => createGateway({ embeddings: false, localTools: [{ ...echoLocal, name: 'bad__name' }] })).toThrow(
      /"__"/,
    );
  });
});

describe('access control', () => {
  const local = {
    name: 'local_note',
    description: 'Writes a note locally',
    inputSchema: { type: 'object' as const },
    handler: () => ({ content: [{ type: 'text' as const, text: 'noted' }] }),
  };

  it('hides exact names from search and refuses their calls', async () => {
    const client = await connectClient(await startProxy({ accessControl: { deny: ['fixture__echo'] } }));
    expect(await searchNames(client, 'echo message', 50)).not.toContain('fixture__echo');
    const refused = await callTool(client, 'fixture__echo', { message: 'x' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/access control/);
  });

  it('hides glob matches', async () => {
    const client = await connectClient(await startProxy({ accessControl: { denyPatterns: ['fixture__a*'] } }));
    const names = await searchNames(client, 'account summary add numbers', 50);
    expect(names).not.toContain('fixture__add');
    expect(names).not.toContain('fixture__account_summary');
    expect((await callTool(client, 'fixture__add', { a: 1, b: 2 })).isError).toBe(true);
  });

  it('allow_servers hides other servers but exempts local tools, which deny still covers', async () => {
    const proxy = await startProxy({
      servers: {
        fixture: { kind: 'in-process', server: createFixtureServer() },
        other: { kind: 'in-process', server: createFixtureServer({ name: 'other' }) },
      },
      localTools: [local, { ...local, name: 'local_denied', description: 'Writes a denied note locally' }],
      accessControl: { allowServers: ['fixture'], deny: ['local_denied'] },
    });
    const client = await connectClient(proxy);
    const names = await searchNames(client, 'echo message note', 50);
    expect(names).toContain('fixture__echo');
    expect(names).not.toContain('other__echo');
    expect(names).toContain('local_note');
    expect(names).not.toContain('local_denied');
    expect((await callTool(client, 'other__echo', { message: 'x' })).isError).toBe(true);
    expect((await callTool(client, 'local_denied')).isError).toBe(true);
    expect(textOf(await callTool(client, 'local_note'))).toBe('noted');
  });

  it("applies before the top-k cut, so hidden tools never take a visible one's slot", async () => {
    const query = 'echo back message, add two numbers, account';
    const unfiltered = await connectClient(await startProxy());
    expect((await searchNames(unfiltered, query, 3)).slice(0, 2).sort()).toEqual(['fixture__add', 'fixture__echo']);
    const client = await connectClient(
      await startProxy({
        accessControl: { denyPatterns: ['fixture__echo'] },
        extraSearchFilters: [hideTools({ patterns: ['fixture__add'] })],
      }),
    );
    // "echo" and "add" outrank account_summary for this query; with both hidden the single slot goes to it.
    const names = await searchNames(client, query, 1);
    expect(names).toEqual(['fixture__account_summary']);
  });

  it('widens the candidate window when filters hide more than it holds', async () => {
    // 400 tools match better than the one visible tool; all of them are hidden.
    const localTools = [
      ...Array.from({ length: 400 }, (_, index) => ({
        name: `secret_report_${index}`,
        description: `Zebrafinch ledger ${index}: zebrafinch ledger`,
        inputSchema: { type: 'object' as const },
        handler: () => ({ content: [] }),
      })),
      {
        name: 'public_summary',
        description: 'A longer public summary that mentions the zebrafinch ledger once among many other words',
        inputSchema: { type: 'object' as const },
        handler: () => ({ content: [] }),
      },
    ];
    const client = await connectClient(
      await startProxy({ localTools, extraSearchFilters: [hideTools({ patterns: ['secret_*'] })] }),
    );
    expect(await searchNames(client, 'zebrafinch ledger', 1)).toEqual(['public_summary']);
  });

  it('a tool hidden by the hide-tools search filter can be neither found nor called', async () => {
    const client = await connectClient(
      await startProxy({ extraSearchFilters: [hideTools({ patterns: ['*__whoami'] })] }),
    );
    expect(await searchNames(client, 'process id whoami', 50)).not.toContain('fixture__whoami');
    expect((await callTool(client, 'fixture__whoami')).isError).toBe(true);
  });
});

describe('events', () => {
  it('emits a structured event for every decision', async () => {
    const log = eventLog();
    const client = await connectClient(await startProxy({ onEvent: log.onEvent }));
    await callTool(client, 'fixture__echo', { message: 'x' });
    const denial = log.events.find((event) => event.decision === 'deny');
    expect(denial).toMatchObject({ pipeline: 'call', filter: 'discoveryGate', tool: 'fixture__echo' });
    expect(typeof denial?.durationUs).toBe('number');
    // The scope is named by a digest, never by the raw session id.
    expect(denial?.scope).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(denial?.principal).toMatch(/.+/);
    await searchNames(client, 'echo');
    expect(log.events.some((event) => event.pipeline === 'search' && event.filter === 'accessControl')).toBe(true);
  });
});

describe('server names', () => {
  it('reject "__" for configured servers', async () => {
    const proxy = createGateway({
      embeddings: false,
      logger: memoryLogger(),
      servers: { bad__name: { kind: 'in-process', server: createFixtureServer() } },
    });
    proxies.push(proxy);
    const report = await proxy.start();
    expect(report.failed[0]?.reason).toMatch(/"__"/);
  });

  it('reject "__" for runtime loads before connecting', async () => {
    const client = await connectClient(await startProxy());
    const refused = await client.callTool({
      name: 'load_mcp_server',
      arguments: { server_name: 'evil__x', url: 'http://127.0.0.1:9/mcp' },
    });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/"__"/);
  });
});
