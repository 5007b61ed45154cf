import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { textOf } from '../proxy/helpers';
import { startTestHousehold, type TestHousehold } from './household';

// SPEC §4.7, §10.10: a crash between the rail call and the receipt loses nothing and never charges
// twice. One process is killed right after the rail charged; a new one finds the payment in doubt,
// settles it from the rail by its idempotency key, and the model's retry gets the one receipt.
const root = fileURLToPath(new URL('../..', import.meta.url));
const folders: string[] = [];
let household: TestHousehold | undefined;
afterEach(async () => {
  await household?.close();
  household = undefined;
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

function crashingOrder(dataDir: string): Promise<{ args: Record<string, unknown>; approvalId: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'tests/payments/crash-child.ts', dataDir],
      { cwd: root, env: { PATH: process.env.PATH ?? '' } },
      (error, stdout, stderr) => {
        if (error?.code !== 137)
          return reject(new Error(`the child did not die at the fault: ${error?.message}\n${stderr}`));
        resolve(JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}'));
      },
    );
  });
}

describe('a crash between the rail and the receipt', () => {
  it('after restart: exactly one rail charge, one receipt, the evidence spent', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'household-crash-'));
    folders.push(dataDir);
    const { args } = await crashingOrder(dataDir);
    const invoiceId = String(args.invoiceId);

    household = await startTestHousehold({ dataDir, enrol: false });
    const store = household.runtime.identity.store;
    // The start settled the payment from the rail: the rail's ledger has it once, with a receipt.
    const payment = await store.payments.get(invoiceId);
    expect(payment).toMatchObject({ state: 'succeeded', attempt: 1 });
    const first = await household.call('payments__charge_invoice', args, 'pay charge invoice');
    expect(first.json, textOf(first.result)).toMatchObject({ status: 'succeeded', receipt: payment?.receipt });
    const again = await household.call('payments__charge_invoice', args, 'pay charge invoice');
    expect(again.json?.receipt).toBe(payment?.receipt);
    expect((await store.identity.approvals.getByInvoice(invoiceId))?.status).toBe('settled');

    const ledger = new Database(join(dataDir, 'household.sqlite'), { readonly: true });
    try {
      expect(ledger.prepare('SELECT COUNT(*) AS n FROM mock_rail_charges').get()).toEqual({ n: 1 });
      const held = ledger.prepare('SELECT state FROM spent_evidence').all() as { state: string }[];
      expect(held.map((row) => row.state)).toEqual(['spent', 'spent']);
    } finally {
      ledger.close();
    }
  });
});
