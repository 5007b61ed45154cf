/**
 * Issue 28 acceptance (SPEC §3.12, §10.6): replicas on one PostgreSQL database share the spent
 * request states. Two gateways, each served over real loopback HTTP, one database, one
 * request-state key: alice is asked for the missing address through replica A, her retry
 * completes through replica B, and the same retry replayed through A (or B again) is refused as
 * already used, with the tool run exactly once.
 */
import { randomBytes } from 'node:crypto';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createInputRounds,
  elicitationFilter,
  openPostgresDiscoveryStore,
  openPostgresSpentLedger,
  serveHttp,
} from '../../proxy/index';
import { cleanupStack, startedGateway } from '../gateway/support';
import { textOf } from '../proxy/helpers';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const alice = { name: 'alice', token: 'alice-token-0123456789abcdef' };

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

/** One replica: its own gateway and pools on the shared database, the shared key; its URL. */
async function replica(url: string, key: Uint8Array, received: unknown[]): Promise<string> {
  const discoveryStore = await openPostgresDiscoveryStore({ url });
  const ledger = await openPostgresSpentLedger(url);
  cleanups.push(async () => {
    await discoveryStore.close();
    await ledger.close();
  });
  const gateway = await startedGateway(cleanups, {
    servers: { pizza: { kind: 'in-process', server: pizzaServer(received) } },
    extraCallFilters: [elicitationFilter()],
    discoveryStore,
  });
  const served = await serveHttp(gateway, { inboundTokens: [alice], rounds: createInputRounds({ key, ledger }) });
  cleanups.push(() => served.close());
  return served.url;
}

async function connect(url: string): Promise<Client> {
  const client = new Client(
    { name: 'sessionless', version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      capabilities: { elicitation: { form: {} } },
      inputRequired: { autoFulfill: false },
    },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${alice.token}` } },
    }),
  );
  cleanups.push(() => client.close());
  return client;
}

type Round = { resultType?: string; requestState?: string };

it.skipIf(postgresAvailable)(`replicas on PostgreSQL are skipped: ${postgresUnavailable}`, () => {});

describe.skipIf(!postgresAvailable)('input rounds on two replicas sharing one PostgreSQL database', () => {
  it('a retry completes on the other replica once, and its replay is refused on either', async () => {
    const url = await createTestDatabase();
    const key = randomBytes(32);
    const receivedA: unknown[] = [];
    const receivedB: unknown[] = [];
    const viaA = await connect(await replica(url, key, receivedA));
    const viaB = await connect(await replica(url, key, receivedB));

    const found = await viaA.callTool({ name: 'search_tools', arguments: { query: 'order a pizza for delivery' } });
    const handle = (found.structuredContent as { handle?: string }).handle;
    expect(handle).toMatch(/^dh_/);
    const args = { tool_name: 'pizza__order', arguments: { size: 'large' }, handle };
    const first = (await viaA.callTool({ name: 'call_tool', arguments: args }, { allowInputRequired: true })) as Round;
    expect(first.resultType).toBe('input_required');
    const requestState = first.requestState ?? '';
    expect(requestState).not.toBe('');

    const answer = { 'ask-1': { action: 'accept', content: { address: '1 Main St' } } };
    const retry = (client: Client) =>
      client.callTool({ name: 'call_tool', arguments: args, inputResponses: answer, requestState } as never, {
        allowInputRequired: true,
      });
    // B never saw the question: it verifies the state with the shared key and spends it in the shared ledger.
    expect(textOf((await retry(viaB)) as never)).toBe('ordered a large pizza to 1 Main St');
    expect(textOf((await retry(viaA)) as never)).toMatch(/already used/);
    expect(textOf((await retry(viaB)) as never)).toMatch(/already used/);
    expect(receivedA).toEqual([]);
    expect(receivedB).toEqual([{ size: 'large', address: '1 Main St' }]);
  });
});
