import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readHouseholdEnv } from '../../lib/env';
import { storeFileName } from '../../lib/index';
import { createOrderAudit, type OrderAudit } from '../../lib/web/order-audit';
import { startTestHousehold, type TestHousehold } from '../payments/household';

// The audit page's reader (SPEC §8) on a real household: a whole $15 order re-verified by Veramo
// link by link, and stored evidence edited behind the household's back shown as failed.
let household: TestHousehold;
let audit: OrderAudit;
let invoiceId: string;
/** Another paid and fulfilled order of the same household: genuine evidence for the wrong order. */
let other: { receipt: string; commitment: string };

beforeAll(async () => {
  household = await startTestHousehold();
  const { runtime } = household;
  const ordered = (await household.invoice([{ sku: 'large-pepperoni', qty: 1 }])) as {
    invoice: string;
    invoiceId: string;
  };
  invoiceId = ordered.invoiceId;
  const approvalId = await household.approve(ordered.invoice);
  const charged = await household.call(
    'payments__charge_invoice',
    { invoiceId, amountCents: 1500, merchantId: runtime.merchant?.did, approvalId },
    'pay charge invoice payment',
  );
  const fulfilled = await household.call('pizza__fulfill', { receipt: String(charged.json?.receipt) }, 'fulfill order');
  await household.call('record_fulfillment', { commitment: fulfilled.json?.commitment }, 'record fulfillment');
  other = await payAndFulfil(household);
  const env = readHouseholdEnv({ EXTENSIBLE_MCP_DATA: household.dataDir });
  audit = createOrderAudit({
    store: runtime.identity.store.identity,
    household: runtime.identity.household,
    webauthn: { rpId: env.rpId, origin: env.origin },
  });
}, 120_000);
afterAll(async () => {
  await household?.close();
});

async function payAndFulfil(on: TestHousehold): Promise<{ receipt: string; commitment: string }> {
  const { invoice, invoiceId: id } = (await on.invoice([{ sku: 'cheese-slice', qty: 1 }])) as {
    invoice: string;
    invoiceId: string;
  };
  const approvalId = await on.approve(invoice);
  const charged = await on.call(
    'payments__charge_invoice',
    { invoiceId: id, amountCents: 400, merchantId: on.runtime.merchant?.did, approvalId },
    'pay charge invoice payment',
  );
  const fulfilled = await on.call('pizza__fulfill', { receipt: String(charged.json?.receipt) }, 'fulfill order');
  return { receipt: String(charged.json?.receipt), commitment: String(fulfilled.json?.commitment) };
}

/** Runs `edit` on the stored approval row of the order, audits, and restores the row. */
async function auditWith(column: 'invoice' | 'receipt' | 'commitment', edit: (jws: string) => string) {
  const database = new Database(join(household.dataDir, storeFileName));
  try {
    const row = database.prepare(`SELECT ${column} AS value FROM approvals WHERE invoice_id = ?`).get(invoiceId) as {
      value: string;
    };
    database.prepare(`UPDATE approvals SET ${column} = ? WHERE invoice_id = ?`).run(edit(row.value), invoiceId);
    try {
      return await audit.auditOrder(invoiceId);
    } finally {
      database.prepare(`UPDATE approvals SET ${column} = ? WHERE invoice_id = ?`).run(row.value, invoiceId);
    }
  } finally {
    database.close();
  }
}

/** The JWS with one claim of its subject changed and the signature kept. */
function withClaim(jws: string, name: string, value: unknown): string {
  const [header, payload, signature] = jws.split('.') as [string, string, string];
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  claims.vc.credentialSubject[name] = value;
  return `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${signature}`;
}

const checks = (view: Awaited<ReturnType<OrderAudit['auditOrder']>>) =>
  view?.links.map((link) => [link.step, link.check.verified ? 'verified' : link.check.reason]);

describe('the order audit', () => {
  it('lists the order and verifies its whole chain: terms, both approvals, receipt, commitment', async () => {
    const orders = await audit.listOrders();
    expect(orders).toContainEqual(
      expect.objectContaining({ invoiceId, status: 'fulfilled', totalCents: 1500, merchantName: 'Main Street Pizza' }),
    );
    const view = await audit.auditOrder(invoiceId);
    expect(checks(view)).toEqual([
      ['terms', 'verified'],
      ['approval', 'verified'],
      ['approval', 'verified'],
      ['receipt', 'verified'],
      ['commitment', 'verified'],
    ]);
    expect(view?.pending).toEqual([]);
    const [terms, child, parent] = view?.links ?? [];
    expect(terms?.binds).toContainEqual({ label: 'amount', value: '$15.00' });
    expect(child?.binds).toContainEqual({ label: 'role', value: 'child' });
    expect(parent?.binds).toContainEqual({ label: 'role', value: 'parent' });
    // Each approval binds the hash of the very invoice the terms link shows.
    const hash = terms?.binds.find((bind) => bind.label === 'invoice hash')?.value;
    expect(child?.binds).toContainEqual({ label: 'invoice hash', value: hash });
  });

  it('a stored receipt edited to another amount fails, and only that link', async () => {
    const view = await auditWith('receipt', (jws) => withClaim(jws, 'amountCents', 1));
    expect(checks(view)).toEqual([
      ['terms', 'verified'],
      ['approval', 'verified'],
      ['approval', 'verified'],
      ['receipt', expect.stringContaining('PaymentReceipt is not acceptable')],
      ['commitment', 'verified'],
    ]);
  });

  it('a receipt with a valid signature from a key the household does not use fails', async () => {
    const view = await auditWith('receipt', () => String(household.runtime.identity.household.memberships.child));
    expect(checks(view)?.[3]).toEqual(['receipt', expect.stringContaining('not acceptable')]);
  });

  it("another order's genuine receipt and commitment fail on what they bind", async () => {
    const receipt = await auditWith('receipt', () => other.receipt);
    expect(checks(receipt)?.[3]).toEqual(['receipt', 'it is for another invoice']);
    const commitment = await auditWith('commitment', () => other.commitment);
    expect(checks(commitment)?.[4]).toEqual(['commitment', 'it commits to another invoice']);
  });

  it('edited terms fail, and so does every approval of the original invoice', async () => {
    const view = await auditWith('invoice', (jws) => withClaim(jws, 'totalCents', 150));
    expect(checks(view)?.slice(0, 3)).toEqual([
      ['terms', expect.stringContaining('Invoice is not acceptable')],
      ['approval', expect.stringContaining('approves another invoice')],
      ['approval', expect.stringContaining('approves another invoice')],
    ]);
  });

  it('a commitment edited to another payment fails', async () => {
    const view = await auditWith('commitment', (jws) => withClaim(jws, 'paymentRef', 'mock_other'));
    expect(checks(view)?.[4]).toEqual(['commitment', expect.stringContaining('not acceptable')]);
  });

  it('terms from a merchant the household no longer trusts fail', async () => {
    const merchants = household.runtime.identity.store.identity.merchants;
    const merchant = await merchants.get(String(household.runtime.merchant?.did));
    if (merchant === undefined) throw new Error('no pinned merchant');
    await merchants.remove(merchant.did);
    try {
      const view = await audit.auditOrder(invoiceId);
      expect(checks(view)?.[0]).toEqual(['terms', 'the signer is not a merchant this household trusts']);
    } finally {
      await merchants.add(merchant);
    }
  });

  it('an unknown order is undefined, and an order waiting for approval lists what is missing', async () => {
    expect(await audit.auditOrder('urn:uuid:00000000-0000-4000-8000-000000000000')).toBeUndefined();
    const { invoice, invoiceId: waiting } = (await household.invoice([{ sku: 'large-pepperoni', qty: 1 }])) as {
      invoice: string;
      invoiceId: string;
    };
    await household.call('request_approval', { invoice }, 'request approval');
    const view = await audit.auditOrder(waiting);
    expect(checks(view)).toEqual([['terms', 'verified']]);
    expect(view?.pending).toEqual([
      "the child's approval",
      "the parent's approval",
      'the payment receipt',
      'the delivery commitment',
    ]);
  });

  it("labels each step with the household's name for the member, beside the role the credential binds", async () => {
    await household.runtime.identity.store.identity.profile.setName({ role: 'child', name: 'Sam', setAt: 1 });
    const view = await audit.auditOrder(invoiceId);
    expect(checks(view)?.every(([, check]) => check === 'verified')).toBe(true);
    expect(view?.links.filter((link) => link.step === 'approval').map((link) => [link.title, link.binds[0]])).toEqual([
      ["Sam's (the child's) approval with a passkey", { label: 'role', value: 'child' }],
      ["The parent's approval with a passkey", { label: 'role', value: 'parent' }],
    ]);
    const { invoice, invoiceId: waiting } = (await household.invoice([{ sku: 'large-pepperoni', qty: 1 }])) as {
      invoice: string;
      invoiceId: string;
    };
    await household.call('request_approval', { invoice }, 'request approval');
    expect((await audit.auditOrder(waiting))?.pending.slice(0, 2)).toEqual([
      "Sam's (the child's) approval",
      "the parent's approval",
    ]);
  });
});
