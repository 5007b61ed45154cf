import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { storeFileName } from '../../lib/index';
import { countingMockRail, startTestHousehold, type TestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';

// A charge is never allowed off the record: when the audit table cannot take the policy's decision
// (a full disk, a locked file — here a trigger that refuses every insert, planted in the real
// SQLite file), the call is refused and the rail never hears of it. Once the table takes rows
// again, the same evidence pays: a refusal spent nothing.
let household: TestHousehold | undefined;
afterEach(async () => {
  await household?.close();
  household = undefined;
});

it('a policy decision the audit table cannot take refuses the charge, and nothing is spent', async () => {
  const { rail, charges } = countingMockRail();
  household = await startTestHousehold({ rail });
  const { invoice, invoiceId } = (await household.invoice([{ sku: 'cheese-slice', qty: 1 }])) as {
    invoice: string;
    invoiceId: string;
  };
  const approvalId = await household.approve(invoice);
  const args = { invoiceId, amountCents: 400, merchantId: household.runtime.merchant?.did, approvalId };

  const database = new Database(join(household.dataDir, storeFileName));
  try {
    database.exec("CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log BEGIN SELECT RAISE(ABORT, 'disk full'); END");
    const refused = await household.call('payments__charge_invoice', args, 'pay charge invoice payment');
    expect(refused.result.isError, textOf(refused.result)).toBe(true);
    expect(textOf(refused.result)).toMatch(/fail closed/);
    expect(charges).toEqual([]);
    database.exec('DROP TRIGGER refuse_audit');
  } finally {
    database.close();
  }

  const paid = await household.call('payments__charge_invoice', args, 'pay charge invoice payment');
  expect(paid.json, textOf(paid.result)).toMatchObject({ status: 'succeeded', invoiceId });
  expect(charges).toHaveLength(1);
});
