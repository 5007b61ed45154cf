/**
 * Issue 29, "A retry after decline or expiry gets the reason and charges nothing", for a payment
 * asked the protocol's way (and its request state signs, not encrypts: no secret, no cart): the household's real proxy over real HTTP, the real shop as a stdio
 * child, members' software authenticators, a rail that records every charge that reaches it, and
 * a v2 client pinned to 2026-07-28 that holds its request state and retries when the test says.
 * The retry arrives after the decision (not while its long-poll is open): after a parent declined
 * the $15 order, and after the invoice expired, it is answered with the reason, the order cannot be
 * paid, and the rail is never called. The gated call's own cases are in
 * tests/identity/gated-calls-wait-the-protocols-way.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { serveHttp } from '../../proxy/http/serve-http';
import { countingMockRail, startTestHousehold, type TestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';
import { connect2026Client, orderTools, type Round, retryOf } from '../support/order-tools';

const token = 'retry-charges-nothing-token-0123456789';
const clockFolder = mkdtempSync(join(tmpdir(), 'retry-clock-'));
const clockFile = join(clockFolder, 'offset-ms');
const counting = countingMockRail();
let household: TestHousehold;
let url: string;
let closeEndpoint: () => Promise<void>;
const clients: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  writeFileSync(clockFile, '0');
  household = await startTestHousehold({ rail: counting.rail, env: { EXTENSIBLE_MCP_TEST_CLOCK_FILE: clockFile } });
  const served = await serveHttp(household.runtime.gateway, { inboundTokens: [{ name: 'external', token }] });
  url = served.url;
  closeEndpoint = () => served.close();
}, 60_000);
beforeEach(() => writeFileSync(clockFile, '0'));
afterEach(async () => {
  for (const client of clients.splice(0)) await client.close();
});
afterAll(async () => {
  await closeEndpoint?.();
  await household?.close();
  rmSync(clockFolder, { recursive: true, force: true });
});

/** A 2026-07-28 client that opens URLs and fulfils its rounds itself; the order's steps through `call_tool`. */
async function orderingClient() {
  const client = await connect2026Client(url, token, 'retry-2026');
  clients.push(client);
  const { handle } = await orderTools(
    async (name, args) => (await client.callTool({ name, arguments: args })) as CallToolResult,
  );
  const call = (tool: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    client.callTool(
      {
        name: 'call_tool',
        arguments: { tool_name: tool, arguments: args, ...(handle !== undefined && { handle }) },
        ...extra,
      } as never,
      { allowInputRequired: true },
    ) as Promise<Round>;
  return {
    /** A signed invoice for a large pepperoni ($15.00: the child and the parent approve). */
    async invoice() {
      const issued = await call('pizza__request_invoice', {
        items: [{ sku: 'large-pepperoni', qty: 1 }],
        deliverTo: '12 Main St',
      });
      return JSON.parse(textOf(issued)) as { invoice: string; invoiceId: string };
    },
    /** `request_approval`; with `round`, its retry carrying that round's state. */
    ask(invoice: string, round?: Round) {
      return call('request_approval', { invoice }, retryOf(round));
    },
    pay(invoiceId: string, approvalId: string) {
      return call('payments__charge_invoice', {
        invoiceId,
        amountCents: 1500,
        merchantId: household.runtime.merchant?.did,
        approvalId,
      });
    },
  };
}

/** The request a round's URL asks names. */
function requestOf(round: Round): string {
  const urls = Object.values(round.inputRequests ?? {}).map((asked) => asked.params?.url ?? '');
  const id = new URL(urls[0] ?? 'http://x/').searchParams.get('request') ?? '';
  expect(id).toMatch(/^[0-9a-f-]{36}$/);
  return id;
}

/** A member's passkey yes (or no) in their window, through the window's own ceremony. */
async function decide(approvalId: string, role: 'child' | 'parent', decision: 'approve' | 'decline') {
  const { passkeys, approvals } = household.runtime.identity;
  const member = household.members[role];
  if (decision === 'decline') {
    expect(await approvals.decline({ approvalId, role })).toMatchObject({ ok: true });
    return;
  }
  const begun = await passkeys.approval.options({ session: member.session, approvalId });
  if (!begun.ok) throw new Error(begun.reason);
  const approved = await passkeys.approval.verify({
    session: member.session,
    ceremonyId: begun.ceremonyId,
    response: member.authenticator.assert(begun.options),
  });
  if (!approved.verified) throw new Error(approved.reason);
}

describe('a 2026-07-28 client’s retry of a household approval', () => {
  it('after the child approved and the parent declined: the reason, the order cannot be paid, the rail never called', async () => {
    const shop = await orderingClient();
    const { invoice, invoiceId } = await shop.invoice();
    const first = await shop.ask(invoice);
    expect(first.resultType).toBe('input_required');
    expect(Object.keys(first.inputRequests ?? {}).sort()).toEqual(['ask-1:child', 'ask-1:parent']);
    const approvalId = requestOf(first);
    // The state signs, it does not encrypt: it names the ask, holds no secret and no cart, and expires.
    const state = first.requestState ?? '';
    const envelope = JSON.parse(
      Buffer.from(state.slice(state.indexOf('.') + 1, state.lastIndexOf('.')), 'base64url').toString('utf8'),
    ) as { p: { about?: string }; exp: number };
    expect(envelope.p.about).toBe(`approval/${approvalId}`);
    for (const kept of [invoice, invoice.split('.')[1] ?? invoice, invoiceId, 'pepperoni', '12 Main St', token])
      expect(JSON.stringify(envelope)).not.toContain(kept);
    expect(envelope.exp).toBeGreaterThan(Date.now() / 1000);
    expect(envelope.exp).toBeLessThanOrEqual(Date.now() / 1000 + 600);
    await decide(approvalId, 'child', 'approve');
    await decide(approvalId, 'parent', 'decline');

    const retried = await shop.ask(invoice, first);
    expect(retried.isError).toBe(true);
    expect(textOf(retried)).toBe('Refused: the parent declined the order. Nothing was charged.');
    expect(retried.structuredContent).toMatchObject({ status: 'declined', approvalId });
    const charge = await shop.pay(invoiceId, approvalId);
    expect(charge.isError).toBe(true);
    expect(textOf(charge)).toMatch(/is declined, not approved/);
    expect(counting.charges.filter((request) => request.invoiceId === invoiceId)).toEqual([]);
  });

  it('arriving after the invoice expired: the reason from the request made for it, the order cannot be paid, the rail never called', async () => {
    const shop = await orderingClient();
    const { invoice, invoiceId } = await shop.invoice();
    const first = await shop.ask(invoice);
    expect(first.resultType).toBe('input_required');
    const approvalId = requestOf(first);
    // The child approved; six minutes later on the household's clock the five-minute invoice has
    // expired, and only then does the retry arrive: the invoice no longer verifies on its own.
    await decide(approvalId, 'child', 'approve');
    writeFileSync(clockFile, String(6 * 60 * 1000));

    const retried = await shop.ask(invoice, first);
    expect(retried.isError).toBe(true);
    expect(textOf(retried)).toBe(
      'Refused: the invoice expired before every approval was given; ask the shop for a new invoice. Nothing was charged.',
    );
    expect(retried.structuredContent).toMatchObject({ status: 'expired', approvalId });
    const charge = await shop.pay(invoiceId, approvalId);
    expect(charge.isError).toBe(true);
    expect(textOf(charge)).toMatch(/is expired, not approved/);
    expect(counting.charges.filter((request) => request.invoiceId === invoiceId)).toEqual([]);
  });
});
