/**
 * Standing allowances through the real household (docs/human-authority.md "Standing allowances"):
 * the runtime with the shop as a stdio child, orders through the embedded proxy, the family-spend
 * policy and settlement, software authenticators enrolled through the real ceremony. The parent
 * signs $5.00 an order and $10.00 a day at the shop; $4.00 slices then need only the child's
 * passkey, until the day's budget or a revocation says the parent must decide again.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Role } from '../../identity/index';
import { createOrderAudit } from '../../lib/web/order-audit';
import { serveHttp } from '../../proxy/http/serve-http';
import { connectInMemory } from '../../proxy/index';
import { origin, rpId } from '../identity/support';
import { countingMockRail, startTestHousehold, type TestHousehold } from '../payments/household';
import { signAllowance } from '../payments/sign-allowance';
import { textOf } from '../proxy/helpers';
import { connect2026Client, orderTools, type Round, retryOf } from '../support/order-tools';

let household: TestHousehold | undefined;
/** What a test opened besides the household (an HTTP endpoint, a client, a clock folder), closed first. */
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await household?.close();
  household = undefined;
});

/** A slice invoiced and sent for approval: who must approve it. */
async function askForSlice(started: TestHousehold) {
  const { invoice, invoiceId } = (await started.invoice([{ sku: 'cheese-slice', qty: 1 }])) as {
    invoice: string;
    invoiceId: string;
  };
  const { json, result } = await started.call('request_approval', { invoice }, 'request approval household');
  if (!json) throw new Error(textOf(result));
  return { invoice, invoiceId, approvalId: String(json.approvalId), requiredRoles: json.requiredRoles as Role[] };
}

/**
 * A slice asked for by another chat on the same household (the shop's invoice limit is per
 * caller): the invoice and the approval request through that chat's own client.
 */
async function askForSliceAs(started: TestHousehold, caller: string) {
  const client = await connectInMemory(started.runtime.gateway, { name: caller, principal: { id: caller } });
  try {
    const call = async (tool: string, args: Record<string, unknown>, query: string) => {
      await client.callTool({ name: 'search_tools', arguments: { query, top_k: 50 } });
      const result = await client.callTool({ name: 'call_tool', arguments: { tool_name: tool, arguments: args } });
      const text = textOf(result as never);
      if (result.isError || !text.startsWith('{')) throw new Error(text);
      return JSON.parse(text) as Record<string, unknown>;
    };
    const { invoice, invoiceId } = (await call(
      'pizza__request_invoice',
      { items: [{ sku: 'cheese-slice', qty: 1 }], deliverTo: '12 Main St' },
      'pizza invoice order',
    )) as { invoice: string; invoiceId: string };
    const json = await call('request_approval', { invoice }, 'request approval household');
    return { invoice, invoiceId, approvalId: String(json.approvalId), requiredRoles: json.requiredRoles as Role[] };
  } finally {
    await client.close();
  }
}

/** The audit chain's hand-over rows of an order (each request handed to the parent at most once). */
async function handoverRows(started: TestHousehold, invoiceId: string) {
  await started.runtime.events.flush();
  const entries = await started.runtime.audit.forOrder(invoiceId);
  return entries.filter((entry) => entry.event.kind === 'approval-handed-over').map((entry) => entry.event);
}

/**
 * A charge the allowance no longer covers: refused before the rail, and the same request handed to
 * the parent (pending, asking the child and the parent, the child's approval kept), once, on the chain.
 */
async function expectHandedToParent(
  started: TestHousehold,
  order: { invoiceId: string; approvalId: string },
  outcome: { result: CallToolResult },
  cause: 'budget-spent' | 'revoked',
) {
  expect(outcome.result.isError).toBe(true);
  expect(textOf(outcome.result)).toMatch(/waiting for the parent's passkey in the parent window/);
  expect(outcome.result.structuredContent).toMatchObject({
    status: 'pending',
    approvalId: order.approvalId,
    waitingFor: ['parent'],
  });
  const record = await started.runtime.identity.store.identity.approvals.get(order.approvalId);
  expect(record).toMatchObject({
    status: 'pending',
    requiredRoles: ['child', 'parent'],
    handover: { cause, period: 'day' },
  });
  expect(record?.approvals.child).toEqual(expect.any(String));
  expect(record?.approvals.parent).toBeUndefined();
  const rows = await handoverRows(started, order.invoiceId);
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({ approvalId: order.approvalId, data: { cause } });
}

/** The child approves with the passkey; then the charge by reference. */
async function childPays(started: TestHousehold, order: Awaited<ReturnType<typeof askForSlice>>) {
  await started.approve(order.invoice, ['child']);
  return charge(started, order);
}

async function charge(started: TestHousehold, order: { invoiceId: string; approvalId: string }) {
  return started.call(
    'payments__charge_invoice',
    {
      invoiceId: order.invoiceId,
      amountCents: 400,
      merchantId: started.runtime.merchant?.did,
      approvalId: order.approvalId,
    },
    'pay charge invoice payment',
  );
}

describe('a standing allowance', () => {
  it("pays two $4 slices on the child's passkey alone; the third, and any after a revocation, need the parent", async () => {
    household = await startTestHousehold();
    const { allowances, allowanceId } = await signAllowance(household);

    const audit = createOrderAudit({
      store: household.runtime.identity.store.identity,
      household: household.runtime.identity.household,
      webauthn: { rpId, origin },
      allowances: household.runtime.identity.store.allowances,
      log: household.runtime.identity.store.audit,
    });
    for (const expectedLeft of [600, 200]) {
      const order = await askForSlice(household);
      expect(order.requiredRoles).toEqual(['child']);
      const paid = await childPays(household, order);
      expect(paid.json, textOf(paid.result)).toMatchObject({ status: 'succeeded', amountCents: 400 });
      expect((await allowances.list())[0]).toMatchObject({ allowanceId, remainingCents: expectedLeft });
      // The audit page: the allowance, re-verified, in place of the parent's approval, with what it left.
      const chain = await audit.auditOrder(order.invoiceId);
      const link = chain?.links.find((entry) => entry.step === 'allowance');
      expect(link?.check).toEqual({ verified: true });
      expect(link?.binds).toEqual(
        expect.arrayContaining([
          { label: 'allowance id', value: allowanceId },
          { label: 'per order', value: 'up to $5.00' },
          { label: 'budget', value: '$10.00 a day (Europe/Paris)' },
          { label: 'left after this order', value: `$${(expectedLeft / 100).toFixed(2)}` },
        ]),
      );
      expect(chain?.links.some((entry) => entry.title.startsWith("The parent's approval"))).toBe(false);
    }

    // $2.00 left today: the third slice asks the parent, and the child's yes alone pays nothing.
    const third = await askForSlice(household);
    expect(third.requiredRoles).toEqual(['child', 'parent']);
    await household.approve(third.invoice, ['child']);
    const refused = await charge(household, third);
    expect(refused.result.isError).toBe(true);
    // The parent approves: the parent's own yes pays it, and the allowance's budget is untouched.
    await household.approve(third.invoice, ['parent']);
    const paid = await charge(household, third);
    expect(paid.json, textOf(paid.result)).toMatchObject({ status: 'succeeded' });
    expect((await allowances.list())[0]).toMatchObject({ remainingCents: 200 });

    // Revoked: the next order needs the parent again, though its total is within the child's own limit.
    expect(await allowances.revoke(allowanceId)).toMatchObject({ ok: true });
    const after = await askForSlice(household);
    expect(after.requiredRoles).toEqual(['child', 'parent']);
  }, 120_000);

  it("covers an order above the child's own $10.00 limit: a $15 pizza on the child's passkey alone, within $20.00 an order", async () => {
    const counting = countingMockRail();
    household = await startTestHousehold({ rail: counting.rail });
    const { allowances, allowanceId } = await signAllowance(household, { perOrderCapCents: 2000, budgetCents: 3000 });
    const { invoice, invoiceId } = (await household.invoice([{ sku: 'large-pepperoni', qty: 1 }])) as {
      invoice: string;
      invoiceId: string;
    };
    const { json } = await household.call('request_approval', { invoice }, 'request approval household');
    // Without the allowance a $15 order asks the parent too; the allowance stands in for that.
    expect(json?.requiredRoles).toEqual(['child']);
    await household.approve(invoice, ['child']);
    const paid = await household.call(
      'payments__charge_invoice',
      { invoiceId, amountCents: 1500, merchantId: household.runtime.merchant?.did, approvalId: json?.approvalId },
      'pay charge invoice payment',
    );
    expect(paid.json, textOf(paid.result)).toMatchObject({ status: 'succeeded', amountCents: 1500 });
    expect(counting.charges.map((request) => request.invoiceId)).toEqual([invoiceId]);
    expect((await allowances.list())[0]).toMatchObject({ allowanceId, remainingCents: 1500 });
  }, 120_000);

  it("lets exactly two of twenty parallel $4 charges spend a $10.00 day; each of the rest waits for the parent, and the parent's passkey pays one once", async () => {
    const counting = countingMockRail();
    household = await startTestHousehold({ rail: counting.rail });
    const { allowanceId } = await signAllowance(household);
    const started = household;
    // Every order is asked for while the budget is whole, so each needs only the child.
    const orders = [];
    for (let index = 0; index < 20; index++) {
      // Ten chats asking for two slices each: at most ten invoices a minute per chat.
      const order = await askForSliceAs(started, `chat-${index % 10}`);
      expect(order.requiredRoles).toEqual(['child']);
      await started.approveAs('child', order.approvalId);
      orders.push(order);
    }
    const outcomes = await Promise.all(orders.map((order) => charge(started, order)));
    const paid = orders.filter((_, index) => outcomes[index]?.json?.status === 'succeeded');
    expect(paid).toHaveLength(2);
    const waiting = orders.filter((_, index) => outcomes[index]?.json?.status !== 'succeeded');
    // Every other one was handed to the parent, once: the same request, now waiting for the parent.
    for (const order of waiting) {
      await expectHandedToParent(
        started,
        order,
        outcomes[orders.indexOf(order)] ?? { result: { content: [] } },
        'budget-spent',
      );
    }
    // The rail saw exactly the two paid orders, once each; only they hold any of the budget.
    expect(counting.charges.map((request) => request.invoiceId).sort()).toEqual(
      paid.map((order) => order.invoiceId).sort(),
    );
    const store = started.runtime.identity.store.allowances;
    const holds = await Promise.all(orders.map((order) => store.holdOf(order.invoiceId)));
    expect(
      holds
        .filter((hold) => hold !== undefined)
        .map((hold) => hold?.invoiceId)
        .sort(),
    ).toEqual(paid.map((order) => order.invoiceId).sort());
    expect(holds.every((hold) => hold === undefined || hold.allowanceId === allowanceId)).toBe(true);

    // The parent's window lists exactly those eighteen, each saying why it asks now.
    const asked = await started.runtime.identity.approvals.pendingFor('parent');
    expect(asked.map((view) => view.approvalId).sort()).toEqual(waiting.map((order) => order.approvalId).sort());
    expect(
      asked.every((view) => view.handover?.cause === 'budget-spent' && view.approvedRoles.join() === 'child'),
    ).toBe(true);

    // Fail closed: until the parent approved, the child's approval alone never reaches the rail.
    const [first, second] = waiting as [(typeof waiting)[number], (typeof waiting)[number]];
    const early = await charge(started, first);
    expect(early.result.isError).toBe(true);
    expect(early.result.structuredContent).toMatchObject({ status: 'pending', approvalId: first.approvalId });
    expect(counting.charges.some((request) => request.invoiceId === first.invoiceId)).toBe(false);
    // The parent approves one with the passkey: the same charge by reference pays it, once.
    await started.approveAs('parent', first.approvalId);
    const [paidByParent, again] = [await charge(started, first), await charge(started, first)];
    expect(paidByParent.json, textOf(paidByParent.result)).toMatchObject({ status: 'succeeded', amountCents: 400 });
    expect(again.json?.receipt ?? textOf(again.result)).toEqual(expect.any(String));
    expect(counting.charges.filter((request) => request.invoiceId === first.invoiceId)).toHaveLength(1);
    // With both approvals, under family-spend: no hold, the day's budget untouched.
    expect(await store.holdOf(first.invoiceId)).toBeUndefined();
    expect(await store.spentCents(allowanceId, holds.find((hold) => hold !== undefined)?.periodKey ?? '')).toBe(800);
    expect(await started.runtime.identity.store.identity.approvals.get(first.approvalId)).toMatchObject({
      status: 'settled',
      approvals: { child: expect.any(String), parent: expect.any(String) },
    });
    // The parent declines another: refused, nothing charged.
    expect(
      await started.runtime.identity.approvals.decline({ approvalId: second.approvalId, role: 'parent' }),
    ).toMatchObject({ ok: true });
    const declined = await charge(started, second);
    expect(declined.result.isError).toBe(true);
    expect(textOf(declined.result)).toMatch(/is declined, not approved/);
    expect(counting.charges.some((request) => request.invoiceId === second.invoiceId)).toBe(false);
    expect(await handoverRows(started, second.invoiceId)).toHaveLength(1);
  }, 180_000);

  it('a revocation racing charges: each charge is held before the revocation and paid, or refused and never charged', async () => {
    const counting = countingMockRail();
    household = await startTestHousehold({ rail: counting.rail });
    const { allowances, allowanceId } = await signAllowance(household);
    const started = household;
    const orders = [];
    for (let index = 0; index < 2; index++) {
      const order = await askForSlice(started);
      await started.approve(order.invoice, ['child']);
      orders.push(order);
    }
    // Approved by the child while the allowance stood, charged only after the revocation.
    const late = await askForSlice(started);
    expect(late.requiredRoles).toEqual(['child']);
    await started.approve(late.invoice, ['child']);
    // The charges and the revocation start together; no timing decides what the test expects.
    const [outcomes, revoked] = await Promise.all([
      Promise.all(orders.map((order) => charge(started, order))),
      allowances.revoke(allowanceId),
    ]);
    expect(revoked).toMatchObject({ ok: true });
    const store = started.runtime.identity.store.allowances;
    const record = await store.get(allowanceId);
    const cutoff = record?.revokedAfterSequence;
    expect(cutoff).toEqual(expect.any(Number));
    for (const [index, order] of orders.entries()) {
      const hold = await store.holdOf(order.invoiceId);
      const railed = counting.charges.some((request) => request.invoiceId === order.invoiceId);
      if (outcomes[index]?.json?.status === 'succeeded') {
        // Paid: its hold is one the revocation recorded as coming before it.
        expect(hold?.sequence).toBeLessThanOrEqual(cutoff ?? -1);
        expect(railed).toBe(true);
      } else {
        // Refused: nothing held, nothing sent to the rail, and handed to the parent.
        expect(hold).toBeUndefined();
        expect(railed).toBe(false);
        await expectHandedToParent(started, order, outcomes[index] ?? { result: { content: [] } }, 'revoked');
      }
    }
    // After the revocation, no new hold is ever taken: the late charge is refused, never sent, and
    // handed to the parent, whose passkey then pays it once.
    const refused = await charge(started, late);
    expect(await store.holdOf(late.invoiceId)).toBeUndefined();
    expect(counting.charges.some((request) => request.invoiceId === late.invoiceId)).toBe(false);
    await expectHandedToParent(started, late, refused, 'revoked');
    await started.approveAs('parent', late.approvalId);
    const paidByParent = await charge(started, late);
    expect(paidByParent.json, textOf(paidByParent.result)).toMatchObject({ status: 'succeeded' });
    expect(counting.charges.filter((request) => request.invoiceId === late.invoiceId)).toHaveLength(1);
    expect(await store.holdOf(late.invoiceId)).toBeUndefined();
    const after = await askForSlice(started);
    expect(after.requiredRoles).toEqual(['child', 'parent']);
  }, 120_000);

  it('twenty concurrent charges of one order its revoked allowance no longer covers hand it to the parent once, before the policy and at the hold', async () => {
    const counting = countingMockRail();
    household = await startTestHousehold({ rail: counting.rail });
    const { allowances, allowanceId } = await signAllowance(household);
    const started = household;
    const beforePolicy = await askForSlice(started);
    await started.approve(beforePolicy.invoice, ['child']);
    const atHold = await askForSlice(started);
    await started.approve(atHold.invoice, ['child']);
    expect(await allowances.revoke(allowanceId)).toMatchObject({ ok: true });
    // Through the proxy: each charge is handed over before the policy (which would refuse the child alone).
    const proxied = await Promise.all(Array.from({ length: 20 }, () => charge(started, beforePolicy)));
    for (const outcome of proxied) {
      expect(outcome.result.structuredContent).toMatchObject({
        status: 'pending',
        approvalId: beforePolicy.approvalId,
        waitingFor: ['parent'],
      });
    }
    await expectHandedToParent(started, beforePolicy, proxied[0] ?? { result: { content: [] } }, 'revoked');
    // Past the policy (settlement called as the payments server would be): the hold refuses each, and hands over once.
    const merchantId = started.runtime.merchant?.did ?? '';
    const settled = await Promise.all(
      Array.from({ length: 20 }, () =>
        started.runtime.settlement.charge({ invoiceId: atHold.invoiceId, amountCents: 400, merchantId }),
      ),
    );
    expect(settled.map((outcome) => outcome.status)).toEqual(Array.from({ length: 20 }, () => 'waiting'));
    expect(await handoverRows(started, atHold.invoiceId)).toHaveLength(1);
    // Asked again once handed over, the charge still waits for the parent (not "the order is pending").
    expect(
      await started.runtime.settlement.charge({ invoiceId: atHold.invoiceId, amountCents: 400, merchantId }),
    ).toMatchObject({ status: 'waiting', approvalId: atHold.approvalId, waitingFor: ['parent'] });
    expect(await started.runtime.identity.store.identity.approvals.get(atHold.approvalId)).toMatchObject({
      status: 'pending',
      requiredRoles: ['child', 'parent'],
      handover: { cause: 'revoked', period: 'day', allowanceId },
    });
    expect(counting.charges).toEqual([]);
  }, 120_000);

  it('a retry of a charge whose rail call is in flight is never handed to the parent, though its own hold spent the budget', async () => {
    let open = () => {};
    const counting = countingMockRail({ gate: new Promise<void>((resolve) => (open = resolve)) });
    household = await startTestHousehold({ rail: counting.rail });
    const started = household;
    // $4.00 a day: the slice's own hold spends all of it.
    await signAllowance(started, { perOrderCapCents: 400, budgetCents: 400 });
    const order = await askForSlice(started);
    await started.approve(order.invoice, ['child']);
    const first = charge(started, order);
    await vi.waitFor(() => expect(counting.charges).toHaveLength(1));
    const retry = await charge(started, order);
    // Answered as any charge asked again while its payment is being confirmed, not handed over.
    expect(retry.result.structuredContent).not.toMatchObject({ status: 'pending' });
    expect(textOf(retry.result)).toMatch(/^payment_in_progress/);
    open();
    expect((await first).json, textOf((await first).result)).toMatchObject({ status: 'succeeded' });
    expect(await handoverRows(started, order.invoiceId)).toEqual([]);
    expect(await started.runtime.identity.approvals.pendingFor('parent')).toEqual([]);
    expect(await started.runtime.identity.store.identity.approvals.get(order.approvalId)).toMatchObject({
      status: 'settled',
      requiredRoles: ['child'],
    });
    expect(counting.charges).toHaveLength(1);
  }, 120_000);

  it('a handed-over order still expires with its invoice: the parent can no longer approve it, and nothing is charged', async () => {
    const clockFolder = mkdtempSync(join(tmpdir(), 'handover-clock-'));
    cleanups.push(() => rmSync(clockFolder, { recursive: true, force: true }));
    const clockFile = join(clockFolder, 'offset-ms');
    writeFileSync(clockFile, '0');
    const counting = countingMockRail();
    household = await startTestHousehold({ rail: counting.rail, env: { EXTENSIBLE_MCP_TEST_CLOCK_FILE: clockFile } });
    const { allowances, allowanceId } = await signAllowance(household);
    const order = await askForSlice(household);
    await household.approve(order.invoice, ['child']);
    expect(await allowances.revoke(allowanceId)).toMatchObject({ ok: true });
    await expectHandedToParent(household, order, await charge(household, order), 'revoked');
    // Six minutes later on the household's clock the five-minute invoice has expired.
    writeFileSync(clockFile, String(6 * 60 * 1000));
    const { passkeys, approvals } = household.runtime.identity;
    const begun = await passkeys.approval.options({
      session: household.members.parent.session,
      approvalId: order.approvalId,
    });
    expect(begun.ok).toBe(false);
    expect(await approvals.pendingFor('parent')).toEqual([]);
    expect(await approvals.get(order.approvalId)).toMatchObject({ status: 'expired' });
    const late = await charge(household, order);
    expect(late.result.isError).toBe(true);
    expect(textOf(late.result)).not.toMatch(/succeeded/);
    expect(counting.charges).toEqual([]);
  }, 120_000);

  it("a 2026-07-28 client on /mcp waits for the parent the protocol's way once its charge was handed over, then pays once", async () => {
    const counting = countingMockRail();
    household = await startTestHousehold({ rail: counting.rail });
    const started = household;
    const { allowances, allowanceId } = await signAllowance(started);
    const token = 'allowance-handover-token-0123456789';
    const served = await serveHttp(started.runtime.gateway, { inboundTokens: [{ name: 'external', token }] });
    cleanups.push(() => served.close());
    const client = await connect2026Client(served.url, token, 'handover-2026');
    cleanups.push(() => client.close());
    const tools = await orderTools(
      async (name, args) => (await client.callTool({ name, arguments: args })) as CallToolResult,
    );
    /** `request_approval`, fulfilling the rounds the way the v2 client does: accept, then retry with the state. */
    const ask = (invoice: string, round?: Round) =>
      client.callTool(
        {
          name: 'call_tool',
          arguments: { tool_name: 'request_approval', arguments: { invoice }, handle: tools.handle },
          ...retryOf(round),
        } as never,
        { allowInputRequired: true },
      ) as Promise<Round>;

    const invoice = await tools.invoice('cheese-slice');
    const first = await ask(invoice.invoice);
    expect(first.resultType).toBe('input_required');
    expect(Object.keys(first.inputRequests ?? {})).toEqual(['ask-1:child']);
    const approvalId =
      new URL(first.inputRequests?.['ask-1:child']?.params?.url ?? 'http://x/').searchParams.get('request') ?? '';
    await started.approveAs('child', approvalId);
    const approved = await ask(invoice.invoice, first);
    expect(approved.structuredContent).toMatchObject({ status: 'approved', approvalId });
    // Revoked before the client pays: the charge waits for the parent, with nothing charged.
    expect(await allowances.revoke(allowanceId)).toMatchObject({ ok: true });
    const handedOver = (await tools.pay(invoice, approvalId)) as Round;
    expect(handedOver.isError).toBe(true);
    expect(handedOver.structuredContent).toMatchObject({ status: 'pending', approvalId, waitingFor: ['parent'] });
    // The same request, asked again the protocol's way: a URL to the parent's window only.
    const again = await ask(invoice.invoice);
    expect(again.resultType).toBe('input_required');
    expect(Object.keys(again.inputRequests ?? {})).toEqual(['ask-1:parent']);
    const url = new URL(again.inputRequests?.['ask-1:parent']?.params?.url ?? 'http://x/');
    expect(url.searchParams.get('as')).toBe('parent');
    expect(url.searchParams.get('request')).toBe(approvalId);
    await started.approveAs('parent', approvalId);
    const decided = await ask(invoice.invoice, again);
    expect(decided.structuredContent).toMatchObject({
      status: 'approved',
      approvalId,
      evidence: { parentApproval: expect.any(String) },
    });
    const paid = await tools.pay(invoice, approvalId);
    expect(textOf(paid)).toMatch(/"status":"succeeded"/);
    expect(counting.charges.map((request) => request.invoiceId)).toEqual([invoice.invoiceId]);
  }, 120_000);
});
