import { afterEach, describe, expect, it } from 'vitest';
import { textOf } from '../proxy/helpers';
import { startTestHousehold, type TestHousehold } from './household';

// SPEC §9, headless: a real MCP client on the composed household (the shop over stdio, the
// payments server under family-spend and single-use evidence), on both policy engines.
let household: TestHousehold | undefined;
afterEach(async () => {
  await household?.close();
  household = undefined;
});

describe.each(['rego', 'cel'] as const)('the whole order on %s', (engine) => {
  it('a $15 order: invoice → approvals by both passkeys → charge by reference → receipt → fulfil → chain complete', async () => {
    household = await startTestHousehold({ engine });
    const { runtime } = household;
    expect(runtime.merchant?.did).toMatch(/^did:key:z6Mk/);

    const { invoice, invoiceId, terms } = (await household.invoice([{ sku: 'large-pepperoni', qty: 1 }])) as {
      invoice: string;
      invoiceId: string;
      terms: { totalCents: number };
    };
    expect(terms.totalCents).toBe(1500);
    const approvalId = await household.approve(invoice);
    const waited = await household.call('await_approval', { approvalId }, 'await approval');
    expect(waited.json).toMatchObject({ status: 'approved', evidence: { invoice } });

    const charged = await household.call(
      'payments__charge_invoice',
      { invoiceId, amountCents: 1500, merchantId: runtime.merchant?.did, approvalId },
      'pay charge invoice payment',
    );
    expect(charged.json, textOf(charged.result)).toMatchObject({ status: 'succeeded', invoiceId, amountCents: 1500 });
    const receipt = String(charged.json?.receipt);

    const fulfilled = await household.call('pizza__fulfill', { receipt }, 'fulfill order receipt');
    expect(fulfilled.json, textOf(fulfilled.result)).toMatchObject({ invoiceId, etaMinutes: expect.any(Number) });
    const recorded = await household.call(
      'record_fulfillment',
      { commitment: fulfilled.json?.commitment },
      'record fulfillment',
    );
    expect(recorded.json).toEqual({ approvalId, status: 'fulfilled' });
    expect((await runtime.identity.store.identity.approvals.get(approvalId))?.status).toBe('fulfilled');
  });

  it('a $4 order with the evidence inline, and the same evidence again returns the first receipt, charging once', async () => {
    household = await startTestHousehold({ engine });
    const { runtime } = household;
    const { invoice, invoiceId } = (await household.invoice([{ sku: 'cheese-slice', qty: 1 }])) as {
      invoice: string;
      invoiceId: string;
    };
    const approvalId = await household.approve(invoice);
    const { json } = await household.call('await_approval', { approvalId }, 'await approval');
    const evidence = json?.evidence as { invoice: string; childApproval: string };
    const args = { invoiceId, amountCents: 400, merchantId: runtime.merchant?.did, ...evidence };
    const first = await household.call('payments__charge_invoice', args, 'pay charge invoice');
    expect(first.json, textOf(first.result)).toMatchObject({ status: 'succeeded' });
    const second = await household.call('payments__charge_invoice', args, 'pay charge invoice');
    expect(second.json?.receipt).toBe(first.json?.receipt);
    expect(await runtime.identity.store.payments.get(invoiceId)).toMatchObject({ state: 'succeeded' });
  });
});
