/**
 * Issue 31 acceptance (SPEC §3.12): a 2026-07-28 client has no session to push a form over, so the
 * search-mode elicitation filter asks through `input_required` with a signed request state, and
 * the client's retry carries the answer. Driven over real loopback HTTP with real v2 clients: the
 * round completes for the client that was asked, and a tampered state, the same state presented by
 * another principal, and a state replayed after the call completed are each refused, with nothing
 * reaching the tool.
 */
import { Client, type ElicitRequestFormParams, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { elicitationFilter, serveHttp } from '../../proxy/index';
import { cleanupStack, startedGateway } from '../gateway/support';
import { textOf } from '../proxy/helpers';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const tokens = [
  { name: 'alice', token: 'alice-token-0123456789abcdef' },
  { name: 'bob', token: 'bob-token-0123456789abcdefgh' },
];

/** A pizza shop whose `order` needs a delivery address the model left out. */
function pizzaServer(received: unknown[]): McpServer {
  const server = new McpServer({ name: 'pizza', version: '1.0.0' });
  server.registerTool(
    'order',
    {
      description: 'Order a pizza for delivery',
      inputSchema: z.object({ size: z.enum(['small', 'large']), address: z.string().describe('Delivery address') }),
    },
    (args) => {
      received.push(args);
      return { content: [{ type: 'text', text: `ordered a ${args.size} pizza to ${args.address}` }] };
    },
  );
  return server;
}

async function endpoint(received: unknown[]): Promise<string> {
  const gateway = await startedGateway(cleanups, {
    servers: { pizza: { kind: 'in-process', server: pizzaServer(received) } },
    extraCallFilters: [elicitationFilter()],
  });
  const served = await serveHttp(gateway, { inboundTokens: tokens });
  cleanups.push(() => served.close());
  return served.url;
}

/** A v2 client speaking 2026-07-28 only, declaring form elicitation; `manual` leaves input_required to the test. */
async function connect(url: string, token: string, options: { manual?: boolean } = {}) {
  const forms: ElicitRequestFormParams[] = [];
  const client = new Client(
    { name: 'sessionless', version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      capabilities: { elicitation: { form: {} } },
      ...(options.manual && { inputRequired: { autoFulfill: false } }),
    },
  );
  client.setRequestHandler('elicitation/create', (request) => {
    forms.push(request.params as ElicitRequestFormParams);
    return { action: 'accept', content: { address: '1 Main St' } };
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  cleanups.push(() => client.close());
  expect(client.getProtocolEra()).toBe('modern');
  return { client, forms };
}

/** Searches, then returns the `call_tool` arguments for the order with the handle the search returned. */
async function searched(client: Client): Promise<Record<string, unknown>> {
  const found = await client.callTool({ name: 'search_tools', arguments: { query: 'order a pizza for delivery' } });
  const handle = (found.structuredContent as { handle?: string }).handle;
  expect(handle).toMatch(/^dh_/);
  return { tool_name: 'pizza__order', arguments: { size: 'large' }, handle };
}

type Round = { resultType?: string; requestState?: string; inputRequests?: Record<string, unknown> };

describe('input rounds for a 2026-07-28 client (search mode over HTTP)', () => {
  it('asks for the missing address through input_required, and the retry completes the call', async () => {
    const received: unknown[] = [];
    const { client, forms } = await connect(await endpoint(received), tokens[0]?.token ?? '');
    const result = await client.callTool({ name: 'call_tool', arguments: await searched(client) });
    expect(textOf(result)).toBe('ordered a large pizza to 1 Main St');
    expect(forms).toHaveLength(1);
    expect(Object.keys(forms[0]?.requestedSchema.properties ?? {})).toEqual(['address']);
    expect(received).toEqual([{ size: 'large', address: '1 Main St' }]);
  });

  it('refuses a tampered state, another principal presenting the state, and a replay after completion', async () => {
    const received: unknown[] = [];
    const url = await endpoint(received);
    const alice = await connect(url, tokens[0]?.token ?? '', { manual: true });
    const args = await searched(alice.client);
    const first = (await alice.client.callTool(
      { name: 'call_tool', arguments: args },
      { allowInputRequired: true },
    )) as Round;
    expect(first.resultType).toBe('input_required');
    expect(Object.keys(first.inputRequests ?? {})).toEqual(['ask-1']);
    const state = first.requestState ?? '';
    expect(state).not.toBe('');
    const answer = { 'ask-1': { action: 'accept', content: { address: '1 Main St' } } };
    const retry = (client: Client, requestState: string) =>
      client.callTool({ name: 'call_tool', arguments: args, inputResponses: answer, requestState } as never, {
        allowInputRequired: true,
      });

    // 1. A state changed by one character fails the MAC: a protocol error, and the tool never runs.
    const flipped = `${state.slice(0, -2)}${state.at(-2) === 'A' ? 'B' : 'A'}${state.at(-1)}`;
    await expect(retry(alice.client, flipped)).rejects.toThrow(/Invalid or expired requestState/);
    // 2. Bob presents alice's untouched state, answer and handle: refused as someone else's.
    const bob = await connect(url, tokens[1]?.token ?? '', { manual: true });
    expect(textOf((await retry(bob.client, state)) as never)).toMatch(/belongs to another request or another client/);
    expect(received).toEqual([]);
    // 3. Alice's own retry completes, once.
    expect(textOf((await retry(alice.client, state)) as never)).toBe('ordered a large pizza to 1 Main St');
    // 4. The same retry again is a replay: refused, and the tool ran only once.
    expect(textOf((await retry(alice.client, state)) as never)).toMatch(/already used/);
    expect(received).toEqual([{ size: 'large', address: '1 Main St' }]);
  });
});
