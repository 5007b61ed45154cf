/**
 * Standing allowances through the real household (docs/human-authority.md "Standing allowances"):
 * the runtime with the shop as a stdio child, orders through the embedded proxy, the family-spend
 * policy and settlement, software authenticators enrolled through the real ceremony. The parent
 * signs $5.00 an order and $10.00 a day at the shop; $4.00 slices then need only the child's
 * passkey, until the day's budget or a revocation says the parent must decide again.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createAllowances, type Role } from '../../identity/index';
import { createOrderAudit } from '../../lib/web/order-audit';
import { connectInMemory } from '../../proxy/index';
import { assertCall } from '../identity/call-approval-support';
import { origin, rpId } from '../identity/support';
import { countingMockRail, startTestHousehold, type TestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';

let household: TestHousehold | undefined;
afterEach(async () => {
  await household?.close();
  household = undefined;
});

const day = 24 * 60 * 60;

/** The parent signs $5.00 an order, $10.00 a day at the shop (or `limits`), as the parent window does. */
async function signAllowance(started: TestHousehold, limits = { perOrderCapCents: 500, budgetCents: 1000 }) {
  const { runtime } = started;
  const allowances = createAllowances({
    household: runtime.identity.household,
    store: runtime.identity.store.allowances,
    origin,
    rpId,
  });
  const drafted = allowances.draft({
    merchantDid: runtime.merchant?.did ?? '',
    merchantName: 'Main Street Pizza',
    ...limits,
    period: 'day',
    timeZone: 'Europe/Paris',
    expiresAt: Math.floor(Date.now() / 1000) + 30 * day,
  });
  if (!drafted.ok) throw new Error(drafted.reason);
  const issued = await allowances.issue({
    terms: drafted.terms,
    assertion: assertCall(started.members.parent.authenticator, drafted.termsHash),
  });
  if (!issued.ok) throw new Error(issued.reason);
  return { allowances, allowanceId: drafted.terms.id };
}

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

/** The child's passkey yes to a request, straight through the window's ceremony. */
async function childApproves(started: TestHousehold, approvalId: string) {
  const { passkeys } = started.runtime.identity;
  const member = started.members.child;
  const begun = await passkeys.approval.options({ session: member.session, approvalId });
  if (!begun.ok) throw new Error(begun.reason);
  const approved = await passkeys.approval.verify({
    session: member.session,
    ceremonyId: begun.ceremonyId,
    response: member.authenticator.assert(begun.options),
  });
  if (!approved.verified) throw new Error(approved.reason);
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

  it('lets exactly two of twenty parallel $4 charges spend a $10.00 day: one rail charge each, the rest refused and never charged', async () => {
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
      await childApproves(started, order.approvalId);
      orders.push(order);
    }
    const outcomes = await Promise.all(orders.map((order) => charge(started, order)));
    const paid = orders.filter((_, index) => outcomes[index]?.json?.status === 'succeeded');
    expect(paid).toHaveLength(2);
    for (const outcome of outcomes.filter((entry) => entry.json?.status !== 'succeeded')) {
      expect(textOf(outcome.result)).toMatch(/parent must approve/);
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
        // Refused: nothing held, nothing sent to the rail.
        expect(textOf(outcomes[index]?.result ?? { content: [] })).toMatch(/revoked|parent must approve/);
        expect(hold).toBeUndefined();
        expect(railed).toBe(false);
      }
    }
    // After the revocation, no new hold is ever taken: the late charge is refused and never sent.
    const refused = await charge(started, late);
    expect(refused.result.isError ?? refused.json?.status !== 'succeeded').toBe(true);
    expect(await store.holdOf(late.invoiceId)).toBeUndefined();
    expect(counting.charges.some((request) => request.invoiceId === late.invoiceId)).toBe(false);
    const after = await askForSlice(started);
    expect(after.requiredRoles).toEqual(['child', 'parent']);
  }, 120_000);
});
