import { ListToolsResultSchema, ResultSchema } from '@modelcontextprotocol/core';
import type { JSONRPCMessage } from '@modelcontextprotocol/server';
import {
  InMemoryTransport,
  LATEST_PROTOCOL_VERSION,
  ProtocolError,
  ProtocolErrorCode,
  Server,
} from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import type { ProxyEvent } from '../../proxy/index';
import { createTransparentProxy } from '../../proxy/transparent/index';
import { textOf } from '../proxy/helpers';
import { blockedOf, callTool, configFrom, connectThroughProxy, type FormAnswer, type ProxySession } from './helpers';

// Tool definitions with fields the SDK's typed schemas do not know about, to prove raw forwarding.
const TOOLS = [
  {
    name: 'book_table',
    title: 'Book a table',
    description: 'Books a restaurant table',
    inputSchema: {
      type: 'object',
      properties: {
        name: { type: 'string', description: 'Guest name' },
        party_size: { type: 'integer', minimum: 1, maximum: 12 },
        notes: { type: 'string' },
      },
      required: ['name', 'party_size'],
      'x-vendor-hint': { ui: 'compact' },
    },
    annotations: { readOnlyHint: false, destructiveHint: false },
    'x-vendor-extension': { tier: 'gold', tags: ['a', 'b'] },
    _meta: { 'example.com/owner': 'tests' },
  },
  {
    name: 'connect_account',
    description: 'Connects an account',
    inputSchema: {
      type: 'object',
      properties: {
        api_key: { type: 'string', description: 'The key' },
        max_tokens: { type: 'integer', description: 'Upper bound on tokens per reply' },
      },
      required: ['api_key', 'max_tokens'],
    },
  },
  {
    name: 'weather_report',
    description: 'A report with an output schema',
    inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    outputSchema: { type: 'object', properties: { celsius: { type: 'number' } }, required: ['celsius'] },
  },
];

/** An upstream we control: it serves TOOLS verbatim and records every call it receives. */
function recordingUpstream() {
  const calls: { name: string; arguments: unknown }[] = [];
  const server = new Server({ name: 'recorder', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
  server.setRequestHandler('tools/list', () => ({ tools: TOOLS }) as never);
  server.setRequestHandler('tools/call', (request) => {
    if (!TOOLS.some((tool) => tool.name === request.params.name)) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    }
    calls.push({ name: request.params.name, arguments: request.params.arguments });
    if (request.params.name === 'weather_report') {
      return { content: [{ type: 'text', text: '{"celsius":21}' }], structuredContent: { celsius: 21 } };
    }
    return { content: [{ type: 'text', text: `called ${request.params.name}` }] };
  });
  const [upstreamClientSide, upstreamServerSide] = InMemoryTransport.createLinkedPair();
  return { calls, server, transport: upstreamClientSide, start: () => server.connect(upstreamServerSide) };
}

const BASE = { upstream: { url: 'http://unused.invalid/mcp' } };

let session: ProxySession | undefined;
afterEach(async () => {
  await session?.close();
  session = undefined;
});

async function start(
  options: {
    raw?: Record<string, unknown>;
    answer?: FormAnswer;
    list?: boolean;
    gateway?: Parameters<typeof connectThroughProxy>[0]['gateway'];
  } = {},
) {
  const upstream = recordingUpstream();
  await upstream.start();
  session = await connectThroughProxy({
    config: configFrom({ ...BASE, ...options.raw }),
    upstreamTransport: upstream.transport,
    ...(options.answer !== undefined && { answer: options.answer }),
    ...(options.list !== undefined && { list: options.list }),
    ...(options.gateway !== undefined && { gateway: options.gateway }),
  });
  return { upstream, session };
}

describe('transparent proxy against a recording upstream', () => {
  it('forwards tools/list raw, keeping fields the SDK schema would strip', async () => {
    const { session } = await start();
    const raw = await session.client.request({ method: 'tools/list' }, ResultSchema);
    expect(raw.tools).toEqual(TOOLS);
    // The SDK's typed schema drops unknown tool fields: forwarding through it would have lost them.
    const typed = ListToolsResultSchema.parse(raw);
    expect(typed.tools[0]).not.toHaveProperty('x-vendor-extension');
  });

  it('forwards complete input unchanged, with 0 and false counting as present', async () => {
    const { session, upstream } = await start({ answer: () => ({ action: 'cancel' }) });
    const args = { name: 'Ann', party_size: 0, notes: '', extra: false };
    await callTool(session.client, 'book_table', args);
    expect(upstream.calls).toEqual([{ name: 'book_table', arguments: args }]);
    expect(session.forms).toEqual([]);
  });

  it('asks for all missing fields (schema order, then configured ones) and merges only those keys', async () => {
    const { session, upstream } = await start({
      raw: { tools: { book_table: { required: ['notes', 'name'] } } },
      answer: () => ({ action: 'accept', content: { party_size: 4, notes: 'window', injected: 'ignored' } }),
    });
    const result = await callTool(session.client, 'book_table', { name: 'Ann' });
    expect(result.isError).not.toBe(true);
    expect(session.forms[0]?.requestedSchema).toEqual({
      type: 'object',
      properties: { party_size: { type: 'integer', minimum: 1, maximum: 12 }, notes: { type: 'string' } },
      required: ['party_size', 'notes'],
    });
    expect(upstream.calls).toEqual([
      { name: 'book_table', arguments: { name: 'Ann', party_size: 4, notes: 'window' } },
    ]);
  });

  it('ties the form to the tool call it belongs to (relatedRequestId)', async () => {
    const { session } = await start({ answer: () => ({ action: 'accept', content: { name: 'Ann', party_size: 2 } }) });
    await callTool(session.client, 'book_table', {});
    const form = session.sent.find(
      (entry) => 'method' in entry.message && entry.message.method === 'elicitation/create',
    );
    const response = session.sent.find(
      (entry) => 'result' in entry.message && 'content' in (entry.message.result as object),
    );
    expect(form?.options?.relatedRequestId).toBeDefined();
    expect(response !== undefined && 'id' in response.message ? response.message.id : undefined).toBe(
      form?.options?.relatedRequestId,
    );
  });

  it.each([
    ['declined', { answer: (() => ({ action: 'decline' })) as FormAnswer }, 'elicitation_declined'],
    ['cancelled', { answer: (() => ({ action: 'cancel' })) as FormAnswer }, 'elicitation_cancelled'],
    [
      'failed',
      {
        answer: (() => {
          throw new Error('form crashed');
        }) as FormAnswer,
      },
      'elicitation_failed',
    ],
    [
      'blank after accept',
      { answer: (() => ({ action: 'accept', content: { name: '  ', party_size: 2 } })) as FormAnswer },
      'required_fields_missing_or_empty',
    ],
    ['unsupported', {}, 'elicitation_unsupported'],
    [
      'disabled',
      { raw: { elicitation: { enabled: false } }, answer: (() => ({ action: 'accept', content: {} })) as FormAnswer },
      'elicitation_disabled',
    ],
  ] as const)('never calls the upstream when elicitation is %s', async (_label, options, reason) => {
    const { session, upstream } = await start(options);
    const result = await callTool(session.client, 'book_table', {});
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ error: 'tool_call_blocked', tool: 'book_table', reason });
    expect(upstream.calls).toEqual([]);
  });

  it('blocks a missing secret without sending any form, and forwards it when supplied', async () => {
    const { session, upstream } = await start({ answer: () => ({ action: 'accept', content: { max_tokens: 256 } }) });
    const blocked = await callTool(session.client, 'connect_account', {});
    expect(blocked.structuredContent).toMatchObject({
      error: 'tool_call_blocked',
      status: 'blocked',
      reason: 'sensitive_required_field',
      missing_or_ambiguous: ['api_key'],
    });
    expect(session.forms).toEqual([]);
    expect(upstream.calls).toEqual([]);

    // Explicit secret, missing max_tokens: max_tokens is not a secret, so it is asked for.
    const result = await callTool(session.client, 'connect_account', { api_key: 'sk-explicit' });
    expect(result.isError).not.toBe(true);
    expect(Object.keys(session.forms[0]?.requestedSchema.properties ?? {})).toEqual(['max_tokens']);
    expect(upstream.calls).toEqual([
      { name: 'connect_account', arguments: { api_key: 'sk-explicit', max_tokens: 256 } },
    ]);
  });

  it('uses configured secret markers instead of the defaults', async () => {
    const { session, upstream } = await start({
      raw: { policies: { sensitive_required: { sensitive_name_markers: ['name'], sensitive_schema_markers: [] } } },
      answer: () => ({ action: 'accept', content: { api_key: 'typed', max_tokens: 1 } }),
    });
    const blocked = await callTool(session.client, 'book_table', {});
    expect(blocked.structuredContent).toMatchObject({
      reason: 'sensitive_required_field',
      missing_or_ambiguous: ['name'],
    });
    expect(session.forms).toEqual([]);
    // api_key is no longer a marker: it is asked for like any other field.
    await callTool(session.client, 'connect_account', {});
    expect(upstream.calls).toEqual([{ name: 'connect_account', arguments: { api_key: 'typed', max_tokens: 1 } }]);
  });

  it('keeps the blocked result out of structuredContent for a tool with an outputSchema', async () => {
    const { session, upstream } = await start();
    await session.client.listTools();
    const result = await session.client.callTool({ name: 'weather_report', arguments: {} });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toBeUndefined();
    expect(blockedOf(result as never)).toMatchObject({
      reason: 'elicitation_unsupported',
      missing_or_ambiguous: ['city'],
    });
    const ok = await session.client.callTool({ name: 'weather_report', arguments: { city: 'Oslo' } });
    expect(ok.structuredContent).toEqual({ celsius: 21 });
    expect(upstream.calls).toHaveLength(1);
  });

  it('forwards the upstream tools/list_changed notification', async () => {
    const { session, upstream } = await start();
    const changed = new Promise<string>((resolve) => {
      session.client.setNotificationHandler('notifications/tools/list_changed', (notification) =>
        resolve(notification.method),
      );
    });
    await upstream.server.sendToolListChanged();
    await expect(changed).resolves.toBe('notifications/tools/list_changed');
  });

  it('holds upstream notifications until the client has initialized', async () => {
    const upstream = recordingUpstream();
    await upstream.start();
    const proxy = createTransparentProxy({
      principal: { id: 'test' },
      config: configFrom(BASE),
      upstreamTransport: upstream.transport,
    });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const received: JSONRPCMessage[] = [];
    let answered: () => void = () => undefined;
    const initialized = new Promise<void>((resolve) => {
      answered = resolve;
    });
    clientSide.onmessage = (message) => {
      received.push(message);
      if ('id' in message && message.id === 1) answered();
    };
    await clientSide.start();
    await proxy.connect(serverSide);
    // Initialize, but never send notifications/initialized: the client is not ready yet.
    await clientSide.send({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    await initialized;
    await upstream.server.sendToolListChanged();
    // The ping's answer comes back after the proxy has handled the notification sent before it
    // (and the proxy answers it itself: the client is not ready to be asked anything).
    await upstream.server.ping();
    expect(
      received.map((message) => ('id' in message ? message.id : 'method' in message ? message.method : '')),
    ).toEqual([1]);
    await proxy.close();
  });

  it('reports a deliberate close as closed, even when the upstream transport closes synchronously', async () => {
    const upstream = recordingUpstream();
    await upstream.start();
    const transport = upstream.transport;
    const closeTransport = transport.close.bind(transport);
    // Like the Streamable HTTP client transport: onclose fires inside close().
    transport.close = async () => {
      transport.onclose?.();
      await closeTransport();
    };
    session = await connectThroughProxy({ config: configFrom(BASE), upstreamTransport: transport });
    await session.proxy.close();
    await expect(session.proxy.closed).resolves.toBe('closed');
  });

  it('reports an upstream that goes away on its own as upstream-lost', async () => {
    const upstream = recordingUpstream();
    await upstream.start();
    session = await connectThroughProxy({ config: configFrom(BASE), upstreamTransport: upstream.transport });
    await upstream.server.close();
    await expect(session.proxy.closed).resolves.toBe('upstream-lost');
  });

  it('opens no upstream connection before the client initializes', async () => {
    const upstream = recordingUpstream();
    let initialized = false;
    upstream.server.oninitialized = () => {
      initialized = true;
    };
    await upstream.start();
    const proxy = createTransparentProxy({
      principal: { id: 'test' },
      config: configFrom(BASE),
      upstreamTransport: upstream.transport,
    });
    const [, serverSide] = InMemoryTransport.createLinkedPair();
    await proxy.connect(serverSide);
    expect(upstream.server.getClientCapabilities()).toBeUndefined();
    expect(initialized).toBe(false);
    await proxy.close();
  });

  it('calls a tool the upstream lists without a tools/list first, and refuses one it does not list unseen', async () => {
    // Clients cache listings and 2026 clients have no session: a call needs no listing first (SPEC §3.5).
    const { upstream, session } = await start({ list: false });
    expect((await callTool(session.client, 'book_table', { name: 'Ann', party_size: 2 })).isError).toBeUndefined();
    const unknown = await callTool(session.client, 'no_such_tool', {});
    expect(unknown.isError).toBe(true);
    expect(textOf(unknown)).toMatch(/Unknown tool "no_such_tool": the server does not offer it/);
    expect(textOf(unknown)).not.toMatch(/search_tools/);
    expect(upstream.calls.map((call) => call.name)).toEqual(['book_table']);
  });

  it('shows an upstream protocol error on a listed tool as an error result naming the upstream', async () => {
    const { upstream, session } = await start();
    upstream.server.setRequestHandler('tools/call', () => {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'party_size must be even');
    });
    const failed = await callTool(session.client, 'book_table', { name: 'Ann', party_size: 3 });
    expect(failed.isError).toBe(true);
    expect(textOf(failed)).toContain('The upstream failed on "book_table"');
    expect(textOf(failed)).toContain('party_size must be even');
  });

  it('runs tools/call through the call pipeline: access control refuses, events record every step', async () => {
    const events: ProxyEvent[] = [];
    const { upstream, session } = await start({
      gateway: { accessControl: { deny: ['connect_account'] }, onEvent: (event) => events.push(event) },
    });
    const refused = await callTool(session.client, 'connect_account', { api_key: 'k', max_tokens: 5 });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/blocked by access control/);
    await callTool(session.client, 'book_table', { name: 'Ann', party_size: 2 });
    expect(upstream.calls.map((call) => call.name)).toEqual(['book_table']);
    expect(events.map((event) => [event.tool, event.filter, event.decision])).toEqual([
      ['connect_account', 'accessControl', 'deny'],
      ['book_table', 'accessControl', 'allow'],
      ['book_table', 'discoveryGate', 'allow'],
      ['book_table', 'elicitation', 'allow'],
    ]);
  });

  it('applies a rego_policy to transparent calls, seeing the bare name and the proxy name as server', async () => {
    const seen: unknown[] = [];
    const { upstream, session } = await start({
      gateway: {
        regoPolicy: function regoPolicy(request) {
          seen.push({ tool: request.tool, server: request.server?.name });
          return request.tool === 'book_table'
            ? { decision: 'deny', reason: 'no bookings today' }
            : { decision: 'allow' };
        },
      },
    });
    expect(textOf(await callTool(session.client, 'book_table', { name: 'Ann', party_size: 2 }))).toBe(
      'no bookings today',
    );
    expect(upstream.calls).toEqual([]);
    expect(seen).toEqual([{ tool: 'book_table', server: 'mcp-elicitation-proxy' }]);
  });
});
