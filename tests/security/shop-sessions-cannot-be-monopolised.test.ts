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
// expiry; one client opened them all and every other client got 503. Now: idle expiry, a global
// cap that makes room by closing the least-recently-used IDLE session (never one with a request
// in flight), and a per-remote-address cap. Two clients on two loopback addresses (the whole
// 127/8 is loopback on Linux): the attacker on 127.0.0.2, everyone else on 127.0.0.3.

const ATTACKER = '127.0.0.2';
const VICTIM = '127.0.0.3';

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});
const PING = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' });

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

type RawResponse = { status: number; sessionId: string | undefined; body: string };

/** One raw request to the shop from `from` (a loopback address), read to the end. */
function send(
  port: number,
  options: { from: string; method?: 'GET' | 'POST'; sessionId?: string; body?: string; agent?: Agent },
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const outgoing = open(port, options, (response) => {
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
    outgoing.on('error', reject);
  });
}

function open(
  port: number,
  options: { from: string; method?: 'GET' | 'POST'; sessionId?: string; body?: string; agent?: Agent },
  onResponse: (response: IncomingMessage) => void,
): ClientRequest {
  const outgoing = request(
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
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(options.sessionId === undefined ? {} : { 'mcp-session-id': options.sessionId }),
      },
    },
    onResponse,
  );
  outgoing.end(options.body);
  return outgoing;
}

async function initialize(port: number, from: string, agent?: Agent): Promise<RawResponse> {
  return send(port, { from, body: INITIALIZE, ...(agent === undefined ? {} : { agent }) });
}

async function ping(port: number, from: string, sessionId: string): Promise<number> {
  return (await send(port, { from, sessionId, body: PING })).status;
}

/** Open a session's standalone SSE stream (GET) and keep it open: a request in flight. */
function holdStream(port: number, from: string, sessionId: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const outgoing = open(port, { from, method: 'GET', sessionId }, (response) => {
      expect(response.statusCode).toBe(200);
      resolve();
    });
    outgoing.on('error', (error) => {
      if (!outgoing.destroyed) reject(error);
    });
    cleanup.push(() => {
      outgoing.destroy();
    });
  });
}

function sessionOf(response: RawResponse): string {
  expect(response.status).toBe(200);
  expect(response.sessionId).toBeTruthy();
  return response.sessionId as string;
}

describe('one client cannot take every shop session (issue 11 item 11)', () => {
  it('the real shop keeps serving 127.0.0.3 after 127.0.0.2 opened 1000 sessions', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'shop-sessions-'));
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const shop = await startHttpShop({ SHOP_AGENT_DATA: dataDir });
    cleanup.push(() => shop.stop());

    // The attack: 1000 initialize requests from one address, none ever closed.
    const agent = new Agent({ keepAlive: true, maxSockets: 16, localAddress: ATTACKER });
    cleanup.push(() => agent.destroy());
    const opened: RawResponse[] = [];
    for (let batch = 0; batch < 1000; batch += 50) {
      opened.push(...(await Promise.all(Array.from({ length: 50 }, () => initialize(shop.port, ATTACKER, agent)))));
    }
    const attackerIds = opened.map((response) => response.sessionId).filter((id) => id !== undefined);

    // Everyone else still gets a session, and a real SDK client works end to end.
    const victim = await connectHttpFrom(`http://127.0.0.1:${shop.port}/mcp`, VICTIM);
    cleanup.push(() => victim.close());
    expect((okContent(await callTool(victim, 'get_menu')) as { items: unknown[] }).items).toHaveLength(6);

    // The attacker holds at most its own cap: its oldest sessions were closed, its newest live.
    expect(await ping(shop.port, ATTACKER, attackerIds[0] as string)).toBe(404);
    expect(await ping(shop.port, ATTACKER, attackerIds.at(-1) as string)).toBe(200);
  }, 90_000);

  it('closes a session idle past the timeout, but never one with a request in flight', async () => {
    let clock = 1_000_000;
    const shop: InProcessShop = await startInProcessShop({
      http: { now: () => clock, sessionLimits: { idleTimeoutMs: 60_000 } },
    });
    cleanup.push(() => shop.server.close());
    const { port } = shop.server;

    const idle = sessionOf(await initialize(port, VICTIM));
    const streaming = sessionOf(await initialize(port, VICTIM));
    await holdStream(port, VICTIM, streaming);

    clock += 60_001;
    expect(await ping(port, VICTIM, idle)).toBe(404);
    expect(await ping(port, VICTIM, streaming)).toBe(200);
    expect(shop.events).toContainEqual({
      event: 'session-evicted',
      fields: { why: 'idle-expired', address: VICTIM },
    });
  });

  it('at the global cap closes the least-recently-used idle session, never a busy one', async () => {
    let clock = 1_000_000;
    const shop: InProcessShop = await startInProcessShop({
      http: { now: () => clock, sessionLimits: { maxSessions: 3, maxSessionsPerAddress: 3 } },
    });
    cleanup.push(() => shop.server.close());
    const { port } = shop.server;

    // The oldest session is busy (an open SSE stream); of the two idle ones, b is least recent.
    const busy = sessionOf(await initialize(port, VICTIM));
    await holdStream(port, VICTIM, busy);
    clock += 1;
    const b = sessionOf(await initialize(port, ATTACKER));
    clock += 1;
    const c = sessionOf(await initialize(port, ATTACKER));
    clock += 1;
    expect(await ping(port, ATTACKER, c)).toBe(200);

    const d = sessionOf(await initialize(port, VICTIM));
    expect(await ping(port, ATTACKER, b)).toBe(404);
    expect(await ping(port, VICTIM, busy)).toBe(200);
    expect(await ping(port, ATTACKER, c)).toBe(200);
    expect(await ping(port, VICTIM, d)).toBe(200);

    // When every session is busy, nothing is evicted: the newcomer is refused instead.
    await holdStream(port, ATTACKER, c);
    await holdStream(port, VICTIM, d);
    const refused = await initialize(port, VICTIM);
    expect(refused.status).toBe(503);
    expect(refused.sessionId).toBeUndefined();
    expect(await ping(port, VICTIM, busy)).toBe(200);
  });

  it('caps sessions per remote address: 127.0.0.2 only ever displaces its own', async () => {
    const shop: InProcessShop = await startInProcessShop({
      http: { sessionLimits: { maxSessions: 100, maxSessionsPerAddress: 2 } },
    });
    cleanup.push(() => shop.server.close());
    const { port } = shop.server;

    const victimSession = sessionOf(await initialize(port, VICTIM));
    const first = sessionOf(await initialize(port, ATTACKER));
    const second = sessionOf(await initialize(port, ATTACKER));
    const third = sessionOf(await initialize(port, ATTACKER));
    expect(await ping(port, ATTACKER, first)).toBe(404);
    expect(await ping(port, ATTACKER, second)).toBe(200);
    expect(await ping(port, ATTACKER, third)).toBe(200);
    expect(await ping(port, VICTIM, victimSession)).toBe(200);

    // With both of its sessions busy, the attacker is refused; the victim is not.
    await holdStream(port, ATTACKER, second);
    await holdStream(port, ATTACKER, third);
    const refused = await initialize(port, ATTACKER);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatch(/Too many sessions from this address/);
    sessionOf(await initialize(port, VICTIM));
  });
});
