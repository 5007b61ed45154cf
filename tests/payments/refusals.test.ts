import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChargeRequest } from '../../lib/payments/rail';
import { textOf } from '../proxy/helpers';
import { countingMockRail, startTestHousehold, type TestHousehold } from './household';

// Refused through the whole household with a reason a model can act on, and nothing reaches the
// rail (SPEC §7.1, §10.5): every case is a real call_tool on the composed proxy.
let household: TestHousehold;
let charges: ChargeRequest[] = [];
let slice: { invoiceId: string; evidence: Record<string, string> };
let pepperoni: { invoiceId: string; evidence: Record<string, string> };
let anotherPepperoni: { invoiceId: string; evidence: Record<string, string> };

beforeAll(async () => {
  const { rail, charges: reaching } = countingMockRail();
  charges = reaching;
  household = await startTestHousehold({ rail });
  slice = await household.approved('cheese-slice');
  pepperoni = await household.approved('large-pepperoni');
  anotherPepperoni = await household.approved('large-pepperoni');
}, 120_000);

afterAll(async () => {
  await household.close();
});

const merchant = () => String(household.runtime.merchant?.did);
const charge = (args: Record<string, unknown>) =>
  household.call('payments__charge_invoice', args, 'pay charge invoice');

describe('refused, and nothing charged', () => {
  it.each([
    [
      'the amount tampered',
      () => ({ invoiceId: slice.invoiceId, amountCents: 100, merchantId: merchant(), ...slice.evidence }),
    ],
    [
      'the merchant tampered',
      () => ({
        invoiceId: slice.invoiceId,
        amountCents: 400,
        merchantId: 'did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK',
        ...slice.evidence,
      }),
    ],
    [
      'another invoice id',
      () => ({ invoiceId: pepperoni.invoiceId, amountCents: 400, merchantId: merchant(), ...slice.evidence }),
    ],
    [
      "the child's approval of another invoice",
      () => ({
        invoiceId: slice.invoiceId,
        amountCents: 400,
        merchantId: merchant(),
        invoice: slice.evidence.invoice,
        childApproval: pepperoni.evidence.childApproval,
      }),
    ],
    [
      "the parent's approval of another invoice on a $15 order",
      () => ({
        invoiceId: pepperoni.invoiceId,
        amountCents: 1500,
        merchantId: merchant(),
        ...pepperoni.evidence,
        parentApproval: anotherPepperoni.evidence.parentApproval,
      }),
    ],
    [
      '$300 claimed for a $15 invoice',
      () => ({ invoiceId: pepperoni.invoiceId, amountCents: 30_000, merchantId: merchant(), ...pepperoni.evidence }),
    ],
  ])('%s', async (_name, args) => {
    const before = charges.length;
    const { result } = await charge(args());
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/Refused by the family spending policy|refused/i);
    expect(charges.length).toBe(before);
  });

  it('$15 with only the child: the guidance names the parent and how to ask', async () => {
    const { parentApproval: _dropped, ...childOnly } = pepperoni.evidence;
    const { result } = await charge({
      invoiceId: pepperoni.invoiceId,
      amountCents: 1500,
      merchantId: merchant(),
      ...childOnly,
    });
    expect(textOf(result)).toContain('the parent must approve because $15.00 is over $10.00');
    expect(charges).toHaveLength(0);
  });

  it('an order over $200 cannot even be put to the household', async () => {
    const { invoice } = (await household.invoice([{ sku: 'large-supreme', qty: 14 }])) as { invoice: string };
    const { result } = await household.call('request_approval', { invoice }, 'request approval');
    expect(textOf(result)).toMatch(/\$308\.00 is over the household's limit of \$200\.00/);
    expect(charges).toHaveLength(0);
  });

  it('by reference: a request that is not approved yet is refused, naming what to do', async () => {
    const { invoice, invoiceId } = (await household.invoice([{ sku: 'small-cheese', qty: 1 }])) as {
      invoice: string;
      invoiceId: string;
    };
    const { json } = await household.call('request_approval', { invoice }, 'request approval');
    const { result } = await charge({
      invoiceId,
      amountCents: 900,
      merchantId: merchant(),
      approvalId: json?.approvalId,
    });
    expect(textOf(result)).toMatch(/pending, not approved: call await_approval/);
    expect(charges).toHaveLength(0);
  });
});
