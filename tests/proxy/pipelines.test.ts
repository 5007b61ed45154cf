import { afterEach, describe, expect, it } from 'vitest';
import {
  type CallFilter,
  createGateway,
  type Gateway,
  type LoadFilter,
  type ResponseFilter,
  type SearchFilter,
} from '../../proxy/index';
import { createFixtureServer } from '../fixtures/fixture-server';
import { callTool, connectClient, eventLog, memoryLogger, searchNames, textOf } from './helpers';

const proxies: Gateway[] = [];
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
});

async function setup(options: Parameters<typeof createGateway>[0]) {
  const calls: { tool: string; args: unknown }[] = [];
  const logger = memoryLogger();
  const events = eventLog();
  const proxy = createGateway({
    servers: {
      fixture: {
        kind: 'in-process',
        server: createFixtureServer({ onCall: (tool, args) => calls.push({ tool, args }) }),
      },
    },
    embeddings: false,
    logger,
    onEvent: events.onEvent,
    ...options,
  });
  proxies.push(proxy);
  await proxy.start();
  const client = await connectClient(proxy);
  return { client, calls, logger, events: events.events };
}

describe('call pipeline', () => {
  it('runs access control, the discovery gate, then extra filters, in that order', async () => {
    const seen: string[] = [];
    const first: CallFilter = function first() {
      seen.push('first');
      return { decision: 'allow' };
    };
    const second: CallFilter = function second() {
      seen.push('second');
      return { decision: 'allow' };
    };
    const { client, events } = await setup({ extraCallFilters: [first, second] });
    await searchNames(client, 'echo message');
    await callTool(client, 'fixture__echo', { message: 'x' });
    expect(seen).toEqual(['first', 'second']);
    const order = events.filter((event) => event.pipeline === 'call').map((event) => event.filter);
    expect(order).toEqual(['accessControl', 'discoveryGate', 'first', 'second']);
  });

  it('stops at the first deny: later filters and the downstream never run', async () => {
    let laterRan = false;
    const refuse: CallFilter = function refuse() {
      return { decision: 'deny', reason: 'Refused by the test policy: amount too high.' };
    };
    const later: CallFilter = function later() {
      laterRan = true;
      return { decision: 'allow' };
    };
    const { client, calls } = await setup({ extraCallFilters: [refuse, later] });
    await searchNames(client, 'echo message');
    const result = await callTool(client, 'fixture__echo', { message: 'x' });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe('Refused by the test policy: amount too high.');
    expect(laterRan).toBe(false);
    expect(calls).toEqual([]);
  });

  it('passes rewritten arguments to the next filter and to the downstream', async () => {
    let nextSaw: unknown;
    const rewrite: CallFilter = function rewrite(request) {
      return {
        decision: 'allow',
        request: { ...request, arguments: { message: `${String(request.arguments.message)}!` } },
      };
    };
    const observe: CallFilter = function observe(request) {
      nextSaw = request.arguments;
      return { decision: 'allow' };
    };
    const { client, calls, events } = await setup({ extraCallFilters: [rewrite, observe] });
    await searchNames(client, 'echo message');
    expect(textOf(await callTool(client, 'fixture__echo', { message: 'hi' }))).toBe('echo: hi!');
    expect(nextSaw).toEqual({ message: 'hi!' });
    expect(calls).toEqual([{ tool: 'echo', args: { message: 'hi!' } }]);
    expect(events.find((event) => event.filter === 'rewrite')?.decision).toBe('rewrite');
  });

  it('a filter that renames the tool sends the call to the tool it named, not to the old one', async () => {
    const rename: CallFilter = function rename(request) {
      return { decision: 'allow', request: { ...request, tool: 'fixture__add', arguments: { a: 1, b: 2 } } };
    };
    const { client, calls } = await setup({ extraCallFilters: [rename] });
    await searchNames(client, 'echo message');
    const result = await callTool(client, 'fixture__echo', { message: 'hi' });
    expect(result.structuredContent).toEqual({ sum: 3 });
    expect(calls).toEqual([{ tool: 'add', args: { a: 1, b: 2 } }]);
  });

  it('denies when a filter throws, logs the error, and never shows it raw', async () => {
    const broken: CallFilter = function broken() {
      throw new Error('database password hunter2 rejected');
    };
    const { client, calls, logger, events } = await setup({ extraCallFilters: [broken] });
    await searchNames(client, 'echo message');
    const result = await callTool(client, 'fixture__echo', { message: 'x' });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/broken check failed.*fail closed/);
    expect(textOf(result)).not.toMatch(/hunter2/);
    expect(calls).toEqual([]);
    expect(logger.lines.some((line) => line.includes('hunter2'))).toBe(true);
    expect(events.find((event) => event.filter === 'broken')?.decision).toBe('error');
  });

  it('receives the tool schema, the principal and the scope', async () => {
    let seen: { schema: unknown; principal: string; scope: string } | undefined;
    const inspect: CallFilter = function inspect(request, context) {
      seen = { schema: request.inputSchema?.required, principal: context.principal.id, scope: context.scope.kind };
      return { decision: 'allow' };
    };
    const { client } = await setup({ extraCallFilters: [inspect] });
    await searchNames(client, 'echo message');
    await callTool(client, 'fixture__echo', { message: 'x' });
    expect(seen?.schema).toEqual(['message']);
    expect(seen?.principal).toMatch(/.+/);
    expect(seen?.scope).toBe('session');
  });
});

describe('response pipeline', () => {
  it('can redact what the downstream returned', async () => {
    const redact: ResponseFilter = function redact(result) {
      const content = result.content.map((block) =>
        block.type === 'text'
          ? { ...block, text: block.text.replace(/\d{4}-\d{4}-\d{4}-\d{4}/g, '[redacted]') }
          : block,
      );
      return { decision: 'allow', result: { ...result, content }, flag: 'card number redacted' };
    };
    const { client, events } = await setup({ extraResponseFilters: [redact] });
    await searchNames(client, 'account summary');
    expect(textOf(await callTool(client, 'fixture__account_summary'))).toBe(
      'Balance 120.00; account number [redacted]',
    );
    expect(events.find((event) => event.pipeline === 'response')).toMatchObject({
      decision: 'flag',
      reason: 'card number redacted',
    });
  });

  it('can deny a response, and runs only for allowed calls', async () => {
    let ran = 0;
    const withhold: ResponseFilter = function withhold() {
      ran += 1;
      return { decision: 'deny', reason: 'The answer was withheld by policy.' };
    };
    const { client } = await setup({ extraResponseFilters: [withhold] });
    expect((await callTool(client, 'fixture__echo', { message: 'x' })).isError).toBe(true);
    expect(ran).toBe(0);
    await searchNames(client, 'echo message');
    expect(textOf(await callTool(client, 'fixture__echo', { message: 'x' }))).toBe(
      'The answer was withheld by policy.',
    );
    expect(ran).toBe(1);
  });
});

describe('search and load pipelines', () => {
  it('a throwing search filter returns nothing (fail closed) and registers nothing', async () => {
    const broken: SearchFilter = function broken() {
      throw new Error('boom');
    };
    const { client } = await setup({ extraSearchFilters: [broken] });
    expect(await searchNames(client, 'echo message')).toEqual([]);
    expect((await callTool(client, 'fixture__echo', { message: 'x' })).isError).toBe(true);
  });

  it('a load filter refuses before any connection is attempted', async () => {
    const refuseAll: LoadFilter = function refuseAll() {
      return { decision: 'deny', reason: 'No runtime loads in this deployment.' };
    };
    const { client, logger } = await setup({ extraLoadFilters: [refuseAll] });
    const result = await client.callTool({
      name: 'load_mcp_server',
      arguments: { server_name: 'x', url: 'http://127.0.0.1:9/mcp' },
    });
    expect(textOf(result)).toBe('No runtime loads in this deployment.');
    expect(logger.lines.some((line) => line.includes('"x"'))).toBe(false);
  });
});
