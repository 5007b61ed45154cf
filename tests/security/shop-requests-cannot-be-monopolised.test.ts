import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, type ClientRequest, type IncomingMessage, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  callTool,
  connectHttpFrom,
  type InProcessShop,
  okContent,
  startHttpShop,
  startInProcessShop,
} from '../shop-agent/support.js';

// Issue 11 item 11 (shop side): the shop's HTTP server capped sessions at 1000 with no idle
// expiry; one client opened them all and every other client got 503. Issue 31 took the sessions
// away: the shop is served statelessly (the SDK's `createMcpHandler`), so an `initialize` holds
// nothing once it is answered, and what a client can still hold is requests in flight, which are
// bounded per remote address. Two clients on two loopback addresses (the whole 127/8 is loopback
// on Linux): the attacker on 127.0.0.2, everyone else on 127.0.0.3.

const ATTACKER = '127.0.0.2';
const VICTIM = '127.0.0.3';

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

type RawResponse = { status: number; sessionId: string | undefined; body: string };
type SendOptions = { from: string; method?: 'GET' | 'POST'; body?: string; agent?: Agent; expectContinue?: boolean };

/** One raw request to the shop's `/mcp` from `from` (a loopback address), read to the end. */
function send(port: number, options: SendOptions): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const outgoing = open(port, options, (response) => read(response).then(resolve, reject));
    outgoing.on('error', reject);
    outgoing.end(options.body);
  });
}

function read(response: IncomingMessage): Promise<RawResponse> {
  return new Promise((resolve) => {
    let body = '';
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => {
      body += chunk;
    });
    response.on('end', () =>
      resolve({
        status: response.statusCode ?? 0,
        sessionId: response.headers['mcp-session-id'] as string | undefined,
        body,
      }),
    );
  });
}

function open(port: number, options: SendOptions, onResponse: (response: IncomingMessage) => void): ClientRequest {
  return request(
    {
      host: '127.0.0.1',
      port,
      path: '/mcp',
      method: options.method ?? 'POST',
      localAddress: options.from,
      agent: options.agent ?? false,
      headers: {
        host: `127.0.0.1:${port}`,
        accept: 'application/json, text/event-stream',
        ...(options.method === 'GET' ? {} : { 'content-type': 'application/json' }),
        ...(options.expectContinue === true ? { expect: '100-continue' } : {}),
      },
    },
    onResponse,
  );
}

/**
 * A POST whose body has not been sent: a request in flight for as long as the test likes (a slow
 * client). Resolves once the shop has taken it up, which its `100 Continue` says (Node's server
 * answers it as it hands the request to the shop's handler), with the function that sends the
 * body and reads the answer.
 */
function holdRequest(port: number, from: string): Promise<() => Promise<RawResponse>> {
  let answered: (response: IncomingMessage) => void = () => {};
  const response = new Promise<IncomingMessage>((resolve) => {
    answered = resolve;
  });
  const outgoing = open(port, { from, expectContinue: true }, (incoming) => answered(incoming));
  cleanup.push(() => {
    outgoing.destroy();
  });
  return new Promise((resolve, reject) => {
    outgoing.on('error', reject);
    outgoing.once('continue', () =>
      resolve(async () => {
        outgoing.end(INITIALIZE);
        return read(await response);
      }),
    );
  });
}

describe('one client cannot take every shop request (issue 11 item 11, stateless since issue 31)', () => {
  it('the real shop keeps serving 127.0.0.3 after 127.0.0.2 sent 1000 initialize requests, none of which holds anything', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'shop-requests-'));
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const shop = await startHttpShop({ SHOP_AGENT_DATA: dataDir });
    cleanup.push(() => shop.stop());

    // The old attack: 1000 initialize requests from one address, none ever closed.
    const agent = new Agent({ keepAlive: true, maxSockets: 16, localAddress: ATTACKER });
    cleanup.push(() => agent.destroy());
    const opened: RawResponse[] = [];
    for (let batch = 0; batch < 1000; batch += 50) {
      opened.push(
        ...(await Promise.all(
          Array.from({ length: 50 }, () => send(shop.port, { from: ATTACKER, body: INITIALIZE, agent })),
        )),
      );
    }
    // Each was answered, and none opened a session: there is nothing to hold, expire or evict.
    expect(opened.map((response) => response.status)).toEqual(Array.from({ length: 1000 }, () => 200));
    expect(opened.filter((response) => response.sessionId !== undefined)).toEqual([]);
    // Nor can a client hold a standalone stream open: there is no session to stream.
    expect((await send(shop.port, { from: ATTACKER, method: 'GET' })).status).toBe(405);

    // Everyone else is served, and a real SDK client works end to end.
    const victim = await connectHttpFrom(`http://127.0.0.1:${shop.port}/mcp`, VICTIM);
    cleanup.push(() => victim.close());
    expect((okContent(await callTool(victim, 'get_menu')) as { items: unknown[] }).items).toHaveLength(6);
  }, 90_000);

  it('holds one address to its bound of requests in flight; another address is still served, and a finished request frees its place', async () => {
    const shop: InProcessShop = await startInProcessShop({ http: { maxRequestsPerAddress: 3 } });
    cleanup.push(() => shop.server.close());
    const { port } = shop.server;

    // Three slow requests from the attacker: its whole allowance, in flight.
    const finishFirst = await holdRequest(port, ATTACKER);
    await holdRequest(port, ATTACKER);
    await holdRequest(port, ATTACKER);
    const refused = await send(port, { from: ATTACKER, body: INITIALIZE });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatch(/Too many requests in flight from this address/);
    expect(shop.events).toContainEqual({ event: 'request-refused', fields: { address: ATTACKER } });

    // The victim's address has its own allowance.
    expect((await send(port, { from: VICTIM, body: INITIALIZE })).status).toBe(200);

    // One of the attacker's requests completes: its place is free again, and only that one.
    expect((await finishFirst()).status).toBe(200);
    expect((await send(port, { from: ATTACKER, body: INITIALIZE })).status).toBe(200);
    await holdRequest(port, ATTACKER);
    expect((await send(port, { from: ATTACKER, body: INITIALIZE })).status).toBe(429);
  });
});
