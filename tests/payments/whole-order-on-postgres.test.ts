import { existsSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { textOf } from '../proxy/helpers';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';
import { startTestHousehold, type TestHousehold } from './household';
import { signAllowance } from './sign-allowance';

// SPEC §11 (issue 28): the whole household on PostgreSQL, chosen by DATABASE_URL in the one
// composition root. A $15 order goes through the real shop over stdio and both passkeys, and every
// store it touches is the database's: nothing of the household is written to the data folder.
let household: TestHousehold | undefined;
afterEach(async () => {
  await household?.close();
  household = undefined;
});

/** One value of a query on the database, read as an operator would. */
async function scalar(url: string, sql: string): Promise<unknown> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return Object.values((await client.query(sql)).rows[0] ?? {})[0];
  } finally {
    await client.end();
  }
}

it.skipIf(postgresAvailable)(`the household on PostgreSQL is skipped: ${postgresUnavailable}`, () => {});

describe.skipIf(!postgresAvailable)('the household on PostgreSQL', () => {
  it('takes a $15 order from invoice to fulfilment, its chain and payment in the database', async () => {
    const url = await createTestDatabase();
    household = await startTestHousehold({ env: { DATABASE_URL: url } });
    const { runtime, dataDir } = household;
    expect(runtime.identity.store.location).toStrictEqual({ kind: 'postgres', url });

    const { invoice, invoiceId } = (await household.invoice([{ sku: 'large-pepperoni', qty: 1 }])) as {
      invoice: string;
      invoiceId: string;
    };
    const approvalId = await household.approve(invoice);
    const charged = await household.call(
      'payments__charge_invoice',
      { invoiceId, amountCents: 1500, merchantId: runtime.merchant?.did, approvalId },
      'pay charge invoice payment',
    );
    expect(charged.json, textOf(charged.result)).toMatchObject({ status: 'succeeded', invoiceId, amountCents: 1500 });
    const fulfilled = await household.call('pizza__fulfill', { receipt: charged.json?.receipt }, 'fulfill order');
    const recorded = await household.call('record_fulfillment', { commitment: fulfilled.json?.commitment }, 'record');
    expect(recorded.json).toEqual({ approvalId, status: 'fulfilled' });

    await runtime.events.flush();
    expect(await scalar(url, `SELECT state FROM payments WHERE invoice_id = '${invoiceId}'`)).toBe('succeeded');
    expect(await scalar(url, 'SELECT COUNT(*)::int FROM mock_rail_charges')).toBe(1);
    const kinds = (await runtime.audit.forOrder(invoiceId)).map((entry) => entry.event.kind);
    expect(kinds).toEqual(expect.arrayContaining(['approval-created', 'approval-approved', 'receipt-issued']));
    expect(Number(await scalar(url, 'SELECT COUNT(*) FROM audit_log'))).toBe((await runtime.audit.head()).rowId);
    expect(existsSync(join(dataDir, 'household.sqlite'))).toBe(false);
  }, 120_000);

  it("pays a $4 slice on the child's passkey alone under the parent's allowance, its hold in the database", async () => {
    const url = await createTestDatabase();
    household = await startTestHousehold({ env: { DATABASE_URL: url } });
    const { runtime } = household;
    const { allowances, allowanceId } = await signAllowance(household);

    const { invoice, invoiceId } = (await household.invoice([{ sku: 'cheese-slice', qty: 1 }])) as {
      invoice: string;
      invoiceId: string;
    };
    const asked = await household.call('request_approval', { invoice }, 'request approval household');
    expect(asked.json?.requiredRoles, textOf(asked.result)).toEqual(['child']);
    await household.approve(invoice, ['child']);
    const charged = await household.call(
      'payments__charge_invoice',
      { invoiceId, amountCents: 400, merchantId: runtime.merchant?.did, approvalId: asked.json?.approvalId },
      'pay charge invoice payment',
    );
    expect(charged.json, textOf(charged.result)).toMatchObject({ status: 'succeeded', amountCents: 400 });
    expect((await allowances.list())[0]).toMatchObject({ allowanceId, remainingCents: 600 });
    expect(await scalar(url, `SELECT allowance_id FROM allowance_holds WHERE invoice_id = '${invoiceId}'`)).toBe(
      allowanceId,
    );
    expect(await scalar(url, 'SELECT COUNT(*)::int FROM mock_rail_charges')).toBe(1);
  }, 120_000);
});
