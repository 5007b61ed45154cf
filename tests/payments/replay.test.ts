import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { textOf } from '../proxy/helpers';
import { countingMockRail, startTestHousehold, type TestHousehold } from './household';

// SPEC §4.7: the same evidence pays once — twice in a row, fifty at once, across a restart, and
// when the rail is slower than the model's patience. A decline spends nothing.
const opened: TestHousehold[] = [];
const folders: string[] = [];
afterEach(async () => {
  for (const household of opened.splice(0)) await household.close();
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

async function start(options: Parameters<typeof startTestHousehold>[0] = {}) {
  const household = await startTestHousehold(options);
  opened.push(household);
  return household;
}

describe('one payment per evidence', () => {
  it('50 concurrent charges with the same evidence: one rail charge, one receipt', async () => {
    const { rail, charges: calls } = countingMockRail();
    const household = await start({ rail });
    const { args } = await household.approvedSlice();
    await household.client.callTool({ name: 'search_tools', arguments: { query: 'pay charge invoice', top_k: 50 } });
    const results = await Promise.all(
      Array.from({ length: 50 }, () =>
        household.client.callTool({
          name: 'call_tool',
          arguments: { tool_name: 'payments__charge_invoice', arguments: args },
        }),
      ),
    );
    const receipts = new Set<string>();
    for (const result of results) {
      const text = textOf(result);
      if (text.startsWith('{')) receipts.add(String(JSON.parse(text).receipt));
      else expect(text).toMatch(/payment_in_progress/);
    }
    expect(receipts.size).toBe(1);
    expect(calls).toHaveLength(1);
  });

  it('the same evidence after a restart returns the first receipt and charges nothing', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'household-replay-'));
    folders.push(dataDir);
    const first = await startTestHousehold({ dataDir });
    const { args } = await first.approvedSlice();
    const paid = await first.call('payments__charge_invoice', args, 'pay charge invoice');
    expect(paid.json, textOf(paid.result)).toMatchObject({ status: 'succeeded' });
    await first.close();

    const { rail, charges: calls } = countingMockRail();
    const second = await start({ dataDir, rail, enrol: false });
    const again = await second.call('payments__charge_invoice', args, 'pay charge invoice');
    expect(again.json?.receipt).toBe(paid.json?.receipt);
    expect(calls).toHaveLength(0);
  });

  it('a charge slower than the call timeout is never charged twice when the model retries', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { rail, charges: calls } = countingMockRail({ gate });
    const household = await start({ rail, callTimeoutMs: 300, railTimeoutMs: 200 });
    const { args, invoiceId } = await household.approvedSlice();
    const timedOut = await household.call('payments__charge_invoice', args, 'pay charge invoice');
    expect(timedOut.result.isError).toBe(true);
    // The model retries while the rail is still busy: told to wait, nothing new reaches the rail.
    const retry = await household.call('payments__charge_invoice', args, 'pay charge invoice');
    expect(textOf(retry.result)).toMatch(/payment_in_progress/);
    release();
    // Once the rail answers, a retry settles from the rail by the same idempotency key: one receipt.
    const settled = await household.call('payments__charge_invoice', args, 'pay charge invoice');
    expect(settled.json, textOf(settled.result)).toMatchObject({ status: 'succeeded', invoiceId });
    // Both rail calls (the slow one and the resolution) carried one idempotency key: one charge.
    expect(new Set(calls.map((call) => call.idempotencyKey))).toEqual(new Set([invoiceId]));
    const again = await household.call('payments__charge_invoice', args, 'pay charge invoice');
    expect(again.json?.receipt).toBe(settled.json?.receipt);
  });

  it('a decline spends nothing: the model is told why, and the same evidence pays on the next attempt', async () => {
    const { rail, charges: calls } = countingMockRail({
      declineWhen: (request) => (request.idempotencyKey.includes('#') ? undefined : 'insufficient_funds'),
    });
    const household = await start({ rail });
    const { args } = await household.approvedSlice();
    const declined = await household.call('payments__charge_invoice', args, 'pay charge invoice');
    expect(declined.result.isError).toBe(true);
    expect(textOf(declined.result)).toMatch(/declined \(insufficient_funds\).*nothing was charged/);
    const paid = await household.call('payments__charge_invoice', args, 'pay charge invoice');
    expect(paid.json, textOf(paid.result)).toMatchObject({ status: 'succeeded' });
    expect(calls.map((call) => call.idempotencyKey)).toEqual([args.invoiceId, `${args.invoiceId}#2`]);
  });
});
