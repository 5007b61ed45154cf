import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type CallContext,
  type DiscoveryStore,
  type Gateway,
  memoryDiscoveryStore,
  openSqliteDiscoveryStore,
  type ProxyEvent,
} from '../../proxy/index';
import { bankServer, cleanupStack, startedGateway } from './support';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

/** A sessionless (2026-style) caller: its principal, and the handle its call carries, if any. */
function sessionless(principal: string, handle?: string): CallContext {
  return { principal: { id: principal }, scope: { kind: 'handle', ...(handle !== undefined && { handle }) } };
}

async function bankGateway(store: DiscoveryStore, events: ProxyEvent[] = []): Promise<Gateway> {
  return startedGateway(cleanups, {
    servers: { bank: { kind: 'in-process', server: bankServer({ received: [] }) } },
    discoveryStore: store,
    onEvent: (event) => events.push(event),
  });
}

const pay = { tool: 'bank__pay', arguments: { amountCents: 100, payee: 'shop' } };
const textOf = (result: { content: { type: string; text?: string }[] }) =>
  result.content.map((block) => block.text ?? '').join('');

describe('discovery handles for sessionless callers (SPEC §3.5, docs/protocol.md)', () => {
  it('a search returns a handle, and a call carrying it (and the same principal) goes through', async () => {
    const gateway = await bankGateway(memoryDiscoveryStore());
    const found = await gateway.search({ query: 'pay an amount' }, sessionless('token:alice'));
    expect(found.hits.map((hit) => hit.name)).toContain('bank__pay');
    expect(found.handle).toMatch(/^dh_[A-Za-z0-9_-]{22}$/);
    const paid = await gateway.call(pay, sessionless('token:alice', found.handle));
    expect(textOf(paid)).toBe('paid');
  });

  it("refuses a call with no handle, a forged one, another principal's, or one that has expired", async () => {
    let now = 1_000_000;
    const gateway = await bankGateway(memoryDiscoveryStore({ ttlMs: 60_000, now: () => now }));
    const found = await gateway.search({ query: 'pay an amount' }, sessionless('token:alice'));
    const refusals = [
      sessionless('token:alice'),
      sessionless('token:alice', 'dh_AAAAAAAAAAAAAAAAAAAAAA'),
      sessionless('token:alice', `${found.handle}x`),
      sessionless('token:bob', found.handle),
    ];
    for (const context of refusals) {
      const refused = await gateway.call(pay, context);
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toMatch(/has not been discovered under this handle.*the handle it returned/);
    }
    now += 60_000;
    const expired = await gateway.call(pay, sessionless('token:alice', found.handle));
    expect(expired.isError).toBe(true);
  });

  it("a later search with the caller's own live handle adds to it; any other handle gets a fresh one", async () => {
    const gateway = await bankGateway(memoryDiscoveryStore());
    const first = await gateway.search({ query: 'pay an amount' }, sessionless('token:alice'));
    const again = await gateway.search({ query: 'payee' }, sessionless('token:alice', first.handle));
    expect(again.handle).toBe(first.handle);
    const stolen = await gateway.search({ query: 'payee' }, sessionless('token:bob', first.handle));
    expect(stolen.handle).not.toBe(first.handle);
    // Bob's own search opened Bob's scope, never Alice's: her handle still opens nothing for him.
    expect((await gateway.call(pay, sessionless('token:bob', first.handle))).isError).toBe(true);
    expect(textOf(await gateway.call(pay, sessionless('token:bob', stolen.handle)))).toBe('paid');
  });

  it('names the principal and a digest of the scope in events, never the handle', async () => {
    const events: ProxyEvent[] = [];
    const gateway = await bankGateway(memoryDiscoveryStore(), events);
    const found = await gateway.search({ query: 'pay an amount' }, sessionless('token:alice'));
    await gateway.call(pay, sessionless('token:alice', found.handle));
    const gate = events.find((event) => event.filter === 'discoveryGate');
    expect(gate).toMatchObject({ principal: 'token:alice', decision: 'allow' });
    expect(gate?.scope).toMatch(/^[A-Za-z0-9_-]{16}$/);
    const handle = found.handle ?? '';
    expect(JSON.stringify(events)).not.toContain(handle.slice(3));
  });

  it('two gateways on one SQLite store agree: search through one, call through the other', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'discovery-handles-'));
    cleanups.push(() => rmSync(folder, { recursive: true, force: true }));
    const path = join(folder, 'proxy.sqlite');
    const [storeA, storeB] = [openSqliteDiscoveryStore({ path }), openSqliteDiscoveryStore({ path })];
    cleanups.push(() => storeA.close());
    cleanups.push(() => storeB.close());
    const [a, b] = [await bankGateway(storeA), await bankGateway(storeB)];
    const found = await a.search({ query: 'pay an amount' }, sessionless('token:alice'));
    expect(textOf(await b.call(pay, sessionless('token:alice', found.handle)))).toBe('paid');
    expect((await b.call(pay, sessionless('token:bob', found.handle))).isError).toBe(true);
  });

  it("a session scope is its own principal's: the same session id under another principal holds nothing", async () => {
    const gateway = await bankGateway(memoryDiscoveryStore());
    const alice: CallContext = { principal: { id: 'token:alice' }, scope: { kind: 'session', id: 's-1' } };
    const bob: CallContext = { principal: { id: 'token:bob' }, scope: { kind: 'session', id: 's-1' } };
    const found = await gateway.search({ query: 'pay an amount' }, alice);
    expect(found.handle).toBeUndefined();
    expect(textOf(await gateway.call(pay, alice))).toBe('paid');
    expect((await gateway.call(pay, bob)).isError).toBe(true);
  });
});
