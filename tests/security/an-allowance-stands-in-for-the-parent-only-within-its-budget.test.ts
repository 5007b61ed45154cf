/**
 * Standing allowances through the real household (docs/human-authority.md "Standing allowances"):
 * the runtime with the shop as a stdio child, orders through the embedded proxy, the family-spend
 * policy and settlement, software authenticators enrolled through the real ceremony. The parent
 * signs $5.00 an order and $10.00 a day at the shop; $4.00 slices then need only the child's
 * passkey, until the day's budget or a revocation says the parent must decide again.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createAllowances, type Role } from '../../identity/index';
import { assertCall } from '../identity/call-approval-support';
import { origin, rpId } from '../identity/support';
import { startTestHousehold, type TestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';

let household: TestHousehold | undefined;
afterEach(async () => {
  await household?.close();
  household = undefined;
});

const day = 24 * 60 * 60;

/** The parent signs $5.00 an order, $10.00 a day at the shop, as the parent window does. */
async function signAllowance(started: TestHousehold) {
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
    perOrderCapCents: 500,
    budgetCents: 1000,
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

    for (const expectedLeft of [600, 200]) {
      const order = await askForSlice(household);
      expect(order.requiredRoles).toEqual(['child']);
      const paid = await childPays(household, order);
      expect(paid.json, textOf(paid.result)).toMatchObject({ status: 'succeeded', amountCents: 400 });
      expect((await allowances.list())[0]).toMatchObject({ allowanceId, remainingCents: expectedLeft });
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

  it('lets exactly two of many parallel $4 charges spend a $10.00 day; the rest are refused and charge nothing', async () => {
    household = await startTestHousehold();
    await signAllowance(household);
    const started = household;
    // Every order is asked for while the budget is whole, so each needs only the child.
    const orders = [];
    for (let index = 0; index < 6; index++) {
      const order = await askForSlice(started);
      expect(order.requiredRoles).toEqual(['child']);
      await started.approve(order.invoice, ['child']);
      orders.push(order);
    }
    const outcomes = await Promise.all(orders.map((order) => charge(started, order)));
    const succeeded = outcomes.filter((outcome) => outcome.json?.status === 'succeeded');
    expect(succeeded).toHaveLength(2);
    for (const outcome of outcomes.filter((entry) => entry.json?.status !== 'succeeded')) {
      expect(textOf(outcome.result)).toMatch(/parent must approve|budget/);
    }
  }, 120_000);
});
