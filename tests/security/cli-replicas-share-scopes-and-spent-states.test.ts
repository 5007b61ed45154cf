/**
 * Issue 28 acceptance, through real processes: two `extensible-mcp` CLI processes over HTTP on one
 * PostgreSQL `--store` and one `--state-key` file, each with its own stdio child of one pizza
 * shop, share the discovery scopes and the spent request states. A search through A opens the
 * discovery gate on B; a tool never searched stays closed on B. A call leaving out the delivery
 * address is asked for through A (`input_required`, `filters.elicit_missing`), the client's retry
 * completes through B, and the same retry replayed through A and through B again is refused as
 * already used: the shop runs the order exactly once.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { textOf } from '../proxy/helpers';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';
import { startHttpCli } from './fixtures/http-cli';

const alice = 'alice-token-0123456789abcdef';
const children: ChildProcess[] = [];
const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** One CLI process with a config folder of its own (one proxy per config) on the shared store's flags. */
async function replica(options: { readonly store: readonly string[]; readonly orders: string }): Promise<string> {
  const folder = mkdtempSync(join(tmpdir(), 'emcp-replica-'));
  writeFileSync(
    join(folder, 'config.json'),
    JSON.stringify({
      mcpServers: {
        pizza: {
          command: process.execPath,
          args: ['--import', 'tsx', 'tests/security/fixtures/pizza-stdio-server.ts'],
          env: { PIZZA_ORDERS_FILE: options.orders },
        },
      },
      filters: { elicit_missing: true },
    }),
  );
  writeFileSync(join(folder, 'inbound'), `alice=${alice}\n`);
  const cli = await startHttpCli(folder, { extra: options.store, started: (child) => children.push(child) });
  return cli.url;
}

/** A recorded HTTP request of the SDK's transport: what a replay sends again, byte for byte. */
interface SentRequest {
  readonly body: string;
  readonly headers: Headers;
}

/** Alice's 2026-07-28 client, answering no input round by itself; `sent` records its POSTs. */
async function modernClient(url: string, sent: SentRequest[]): Promise<Client> {
  const client = new Client(
    { name: 'sessionless', version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      capabilities: { elicitation: { form: {} } },
      inputRequired: { autoFulfill: false },
    },
  );
  const recording = (input: string | URL | Request, init?: RequestInit) => {
    if (init?.method === 'POST' && typeof init.body === 'string') {
      sent.push({ body: init.body, headers: new Headers(init.headers) });
    }
    return fetch(input, init);
  };
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${alice}` } },
      fetch: recording,
    }),
  );
  clients.push(client);
  return client;
}

/** The JSON-RPC answer of a raw POST, whether it came as JSON or as one SSE event. */
async function answerOf(response: Response): Promise<{ result?: unknown; error?: { message: string } }> {
  const text = await response.text();
  const data = response.headers.get('content-type')?.includes('text/event-stream')
    ? text
        .split('\n')
        .filter((line) => line.startsWith('data: '))
        .map((line) => line.slice('data: '.length))
        .at(-1)
    : text;
  return JSON.parse(data ?? '{}') as { result?: unknown; error?: { message: string } };
}

type Round = { resultType?: string; requestState?: string; inputRequests?: Record<string, unknown> };

const ordersIn = (path: string) =>
  existsSync(path)
    ? readFileSync(path, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as { pid: number; size: string; address: string })
    : [];

it.skipIf(postgresAvailable)(`CLI replicas on PostgreSQL are skipped: ${postgresUnavailable}`, () => {});

describe.skipIf(!postgresAvailable)('two CLI processes on one PostgreSQL store and one state key', () => {
  it('share the discovery scopes and spend an input round once, whichever replica completes or replays it', async () => {
    const scratch = mkdtempSync(join(tmpdir(), 'emcp-replicas-'));
    const orders = join(scratch, 'orders.jsonl');
    const store = ['--store', await createTestDatabase(), '--state-key', join(scratch, 'state.key')];
    // Both start at once on the empty database: they migrate it, and make the key file, concurrently.
    const [urlA, urlB] = await Promise.all([replica({ store, orders }), replica({ store, orders })]);
    const sentA: SentRequest[] = [];
    const sentB: SentRequest[] = [];
    const viaA = await modernClient(urlA ?? '', sentA);
    const viaB = await modernClient(urlB ?? '', sentB);

    // Discovery through A opens the gate on B for the tool found, and only for it.
    const found = await viaA.callTool({
      name: 'search_tools',
      arguments: { query: 'order a pizza for delivery', top_k: 1 },
    });
    const { handle, results } = found.structuredContent as { handle?: string; results?: { name: string }[] };
    expect(handle).toMatch(/^dh_/);
    expect(results?.map((hit) => hit.name)).toEqual(['pizza__order']);
    const unsearched = await viaB.callTool({
      name: 'call_tool',
      arguments: { tool_name: 'pizza__refund', arguments: { payment: 'pay_1' }, handle },
    });
    expect(unsearched.isError).toBe(true);
    expect(textOf(unsearched)).toMatch(/has not been discovered under this handle/);

    // A asks for the missing address; its question is a signed request state, not a session.
    const args = { tool_name: 'pizza__order', arguments: { size: 'large' }, handle };
    const first = (await viaA.callTool({ name: 'call_tool', arguments: args }, { allowInputRequired: true })) as Round;
    expect(first.resultType).toBe('input_required');
    expect(Object.keys(first.inputRequests ?? {})).toEqual(['ask-1']);
    const requestState = first.requestState ?? '';
    expect(requestState).not.toBe('');
    expect(ordersIn(orders)).toEqual([]);

    // B never saw the question: it verifies the state with the shared key, passes the gate on
    // the shared scope, and spends the state in the shared ledger.
    const answer = { 'ask-1': { action: 'accept', content: { address: '1 Main St' } } };
    const retry = (client: Client) =>
      client.callTool({ name: 'call_tool', arguments: args, inputResponses: answer, requestState } as never, {
        allowInputRequired: true,
      });
    expect(textOf(await retry(viaB))).toBe('ordered a large pizza to 1 Main St');
    const completed = sentB.find((request) => request.body.includes(requestState));
    if (completed === undefined) throw new Error('the SDK sent no retry carrying the request state to B');

    // The same retry through the SDK on A and on B again, then its exact bytes sent by hand to both.
    expect(textOf(await retry(viaA))).toMatch(/already used/);
    expect(textOf(await retry(viaB))).toMatch(/already used/);
    for (const url of [urlA, urlB]) {
      const replayed = await answerOf(
        await fetch(url ?? '', { method: 'POST', headers: completed.headers, body: completed.body }),
      );
      expect(textOf(replayed.result)).toMatch(/already used/);
    }

    const ran = ordersIn(orders);
    expect(ran.map(({ size, address }) => ({ size, address }))).toEqual([{ size: 'large', address: '1 Main St' }]);
  });
});
