import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HouseholdEvent } from '../../lib/events';
import { startTestHousehold, type TestHousehold } from '../payments/household';

// SPEC §8 live log: every decision point reports one structured event with the session and the
// order it concerns, and each is in the hash-chained audit table before the answer it describes
// reaches the caller.
let household: TestHousehold;
const seen: HouseholdEvent[] = [];

beforeAll(async () => {
  household = await startTestHousehold({ onEvent: (event) => seen.push(event) });
}, 60_000);
afterAll(async () => {
  await household?.close();
});

/**
 * The events a step produced, read back from the audit table once the bus wrote what the step
 * emitted (recorded decisions are in it when the step returns; emitted events follow in order).
 */
async function step<T>(run: () => Promise<T>): Promise<{ value: T; events: HouseholdEvent[] }> {
  const audit = household.runtime.identity.store.audit;
  await household.runtime.events.flush();
  const before = (await audit.head()).rowId;
  const value = await run();
  await household.runtime.events.flush();
  return { value, events: (await audit.after(before)).map((entry) => entry.event) };
}

const kinds = (events: readonly HouseholdEvent[]) => events.map((event) => `${event.kind}:${event.outcome}`);

describe('decision events', () => {
  it('a whole order: refusal with guidance, approvals, policy allow, evidence spent, charge, receipt, fulfilment', async () => {
    const { invoice, invoiceId } = (await household.invoice([{ sku: 'large-pepperoni', qty: 1 }])) as {
      invoice: string;
      invoiceId: string;
    };
    const merchantId = household.runtime.merchant?.did;
    const args = { invoiceId, amountCents: 1500, merchantId };

    const refused = await step(() =>
      household.call('payments__charge_invoice', { ...args, invoice }, 'pay charge invoice payment'),
    );
    const policyDenial = refused.events.find((event) => event.kind === 'policy-decision');
    expect(policyDenial).toMatchObject({ outcome: 'deny', orderId: invoiceId, source: 'proxy' });
    expect(policyDenial?.session).toMatch(/.+/);
    expect(policyDenial?.message).toMatch(/Refused by the family spending policy: the call is missing `childApproval`/);
    // The pipeline's own record of the same refusal, from the filter that returned it.
    expect(kinds(refused.events)).toContain('call-decision:deny');

    const approved = await step(() => household.approve(invoice));
    expect(approved.events.filter((event) => event.orderId === invoiceId).map((event) => event.kind)).toEqual([
      'approval-created',
      'approval-approved',
      'approval-approved',
    ]);

    const approvalId = approved.value;
    const charged = await step(() =>
      household.call('payments__charge_invoice', { ...args, approvalId }, 'pay charge invoice payment'),
    );
    const ofOrder = charged.events.filter((event) => event.orderId === invoiceId);
    expect(kinds(ofOrder)).toEqual([
      'policy-decision:allow',
      'evidence-held:info',
      'charge-started:info',
      'approval-settled:ok',
      'receipt-issued:ok',
      'evidence-spent:ok',
    ]);
    expect(ofOrder[0]?.session).toBe(policyDenial?.session);

    const again = await step(() =>
      household.call('payments__charge_invoice', { ...args, approvalId }, 'pay charge invoice payment'),
    );
    expect(kinds(again.events.filter((event) => event.orderId === invoiceId))).toEqual(['evidence-replayed:info']);

    const fulfilled = await household.call(
      'pizza__fulfill',
      { receipt: String(charged.value.json?.receipt) },
      'fulfill',
    );
    const recorded = await step(() =>
      household.call('record_fulfillment', { commitment: fulfilled.json?.commitment }, 'record fulfillment'),
    );
    expect(kinds(recorded.events.filter((event) => event.orderId === invoiceId))).toEqual(['approval-fulfilled:ok']);
  });

  it('a policy denial names the checks that failed beside the guidance', async () => {
    const { invoiceId, args } = await household.approvedSlice();
    const tampered = await step(() => household.call('payments__charge_invoice', { ...args, amountCents: 1 }, 'pay'));
    const denial = tampered.events.find((event) => event.kind === 'policy-decision');
    expect(denial).toMatchObject({ outcome: 'deny', orderId: invoiceId });
    expect(denial?.data?.failedChecks).toEqual(expect.arrayContaining([expect.stringMatching(/amount/)]));
    expect(denial?.message).toMatch(/^Refused by the family spending policy/);
  });

  it('evidence reused for other arguments is refused as such', async () => {
    const { invoiceId, args } = await household.approvedSlice();
    await household.call('payments__charge_invoice', args, 'pay');
    const reused = await step(() => household.call('payments__charge_invoice', { ...args, amountCents: 401 }, 'pay'));
    expect(reused.events.find((event) => event.kind === 'evidence-refused')).toMatchObject({
      outcome: 'deny',
      orderId: invoiceId,
    });
  });

  it('a load under a configured name is refused in the load pipeline', async () => {
    const load = await step(() =>
      household.client.callTool({
        name: 'load_mcp_server',
        arguments: { server_name: 'payments', url: 'https://attacker.example/mcp' },
      }),
    );
    expect(load.events.find((event) => event.kind === 'load-decision' && event.outcome === 'deny')).toBeDefined();
  });

  it('enrollment and sign-in are reported; every event fits the one schema and names no secret', () => {
    expect(kinds(seen)).toEqual(expect.arrayContaining(['passkey-enrolled:ok', 'sign-in-succeeded:ok']));
    for (const event of seen) expect(HouseholdEvent.safeParse(event).success).toBe(true);
    const text = JSON.stringify(seen);
    for (const { code } of household.runtime.identity.codes) expect(text).not.toContain(code);
  });
});
