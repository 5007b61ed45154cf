import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { type DispatchOutcome, openSqliteEvidenceStore, PAYMENT_IN_PROGRESS_REASON } from '../../proxy/index';
import { textOf } from '../proxy/helpers';
import { deferred, type GovernedRail, governedRail, POLICY_NOW_MS, payArguments, receiptText } from './governed-rail';

/**
 * SPEC §4.7, single-use through settlement: for a payment the evidence wrapper wraps dispatch —
 * reserve, policy, rail — commits on a receipt, releases on a failure the rail reports, and leaves
 * the evidence in doubt otherwise. Every case runs through the real gateway, a real SDK client
 * and a real in-process MCP rail that counts what it ran.
 */

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(options: Parameters<typeof governedRail>[0] = {}): Promise<GovernedRail> {
  const governed = await governedRail(options);
  cleanups.push(() => governed.close());
  return governed;
}

const inProgress = (result: CallToolResult) => result.isError === true && textOf(result) === PAYMENT_IN_PROGRESS_REASON;
const jtiOf = (name: string) => `urn:uuid:settlement-${name}`;

describe('single-use evidence through settlement (spend on success)', () => {
  it('the same evidence twice dispatches once, and the retry sees the first receipt again', async () => {
    const { pay, rail, store } = await setup();
    const args = payArguments(500, jtiOf('twice'));
    const first = await pay(args);
    const second = await pay(args);
    expect(rail.calls).toHaveLength(1);
    expect(textOf(first)).toBe(receiptText(1));
    expect(second).toEqual(first);
    expect(await store.lookup([jtiOf('twice')], POLICY_NOW_MS)).toMatchObject([{ state: 'spent' }]);
  });

  it('50 concurrent calls with the same evidence dispatch exactly once: one receipt, 49 payment_in_progress', async () => {
    const { pay, rail } = await setup();
    // The rail holds the first payment until every other call has been answered, so none of them
    // can have seen it settled: each must have been held off while it was running.
    const others = deferred();
    rail.holdFirst = others.promise;
    const args = payArguments(500, jtiOf('fifty'));
    let answered = 0;
    const calls = Array.from({ length: 50 }, () =>
      pay(args).then((result) => {
        answered++;
        if (answered === 49) others.resolve();
        return result;
      }),
    );
    const results = await Promise.all(calls);
    expect(rail.calls).toHaveLength(1);
    expect(results.filter((result) => textOf(result) === receiptText(1))).toHaveLength(1);
    expect(results.filter(inProgress)).toHaveLength(49);
    // Once settled, the same call is answered with the first receipt.
    expect(textOf(await pay(args))).toBe(receiptText(1));
    expect(rail.calls).toHaveLength(1);
  });

  it.each([
    ['a declined payment (an error result)', 'decline', 'card declined'],
    ['a refused request (a protocol error, like a 4xx)', 'error', 'the rail refused the request (400)'],
  ] as const)('%s releases the evidence, and the retry is dispatched again', async (_label, mode, shown) => {
    const { pay, rail, store } = await setup();
    const args = payArguments(500, jtiOf(`failed-${mode}`));
    rail.mode = mode;
    const failed = await pay(args);
    expect(failed.isError).toBe(true);
    expect(textOf(failed)).toContain(shown);
    expect(await store.lookup([jtiOf(`failed-${mode}`)], POLICY_NOW_MS)).toEqual([]);
    rail.mode = 'succeed';
    expect(textOf(await pay(args))).toBe(receiptText(2));
    expect(rail.calls).toHaveLength(2);
  });

  it('a payment slower than the call timeout stays in doubt past the lease; the retry is told to wait and nothing is sent again', async () => {
    const { pay, rail, store, clock } = await setup({ callTimeoutMs: 200 });
    const args = payArguments(500, jtiOf('slow'));
    rail.mode = 'hang';
    const timedOut = await pay(args);
    expect(textOf(timedOut)).toContain('The outcome is unknown');
    expect(await store.lookup([jtiOf('slow')], clock.ms)).toMatchObject([{ state: 'in-doubt' }]);
    // Ten minutes on (far past the 60 s lease, still inside the evidence's life), the model retries.
    clock.ms += 10 * 60_000;
    rail.mode = 'succeed';
    const retried = await pay(args);
    expect(inProgress(retried)).toBe(true);
    expect(rail.calls).toHaveLength(1);
    expect(await store.lookup([jtiOf('slow')], clock.ms)).toMatchObject([{ state: 'in-doubt' }]);
  });

  it('an in-doubt payment resolved by the host as completed: the retry returns that receipt and the evidence is spent', async () => {
    const settled: CallToolResult = { content: [{ type: 'text', text: 'receipt from the rail by idempotency key' }] };
    const asked: string[] = [];
    const { pay, rail, store } = await setup({
      callTimeoutMs: 200,
      resolveInDoubt: async (request, _context, evidence) => {
        asked.push(`${request.tool} ${evidence.map((entry) => entry.id).join(',')}`);
        return { status: 'completed', result: settled };
      },
    });
    const args = payArguments(500, jtiOf('resolved'));
    rail.mode = 'hang';
    await pay(args);
    rail.mode = 'succeed';
    expect(await pay(args)).toEqual(settled);
    expect(await pay(args)).toEqual(settled);
    expect(asked).toEqual([`rail__pay ${jtiOf('resolved')}`]);
    expect(rail.calls).toHaveLength(1);
    expect(await store.lookup([jtiOf('resolved')], POLICY_NOW_MS)).toMatchObject([{ state: 'spent' }]);
  });

  it('an in-doubt payment resolved as failed is released and the retry dispatched as a fresh attempt', async () => {
    const outcomes: DispatchOutcome[] = [{ status: 'unknown', reason: 'the rail does not know yet' }];
    const { pay, rail } = await setup({
      callTimeoutMs: 200,
      resolveInDoubt: async () => outcomes.shift() ?? { status: 'failed', reason: 'no charge under that key' },
    });
    const args = payArguments(500, jtiOf('resolved-failed'));
    rail.mode = 'hang';
    await pay(args);
    rail.mode = 'succeed';
    // First the rail cannot tell (unknown): wait. Then it says no charge exists: pay afresh.
    expect(inProgress(await pay(args))).toBe(true);
    expect(rail.calls).toHaveLength(1);
    expect(textOf(await pay(args))).toBe(receiptText(2));
    expect(rail.calls).toHaveLength(2);
  });

  it('the in-progress refusal names itself so a host and a model can recognise it', () => {
    expect(PAYMENT_IN_PROGRESS_REASON.startsWith('payment_in_progress:')).toBe(true);
    expect(PAYMENT_IN_PROGRESS_REASON).toContain('do not pay again');
  });
});

describe('in doubt while another instance is sending it (one store, two gateways)', () => {
  const folders: string[] = [];
  afterEach(() => {
    for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
  });

  /** Two gateways on one evidence file, as two instances share one database; only `b` resolves. */
  async function twoInstances() {
    const folder = mkdtempSync(join(tmpdir(), 'emcp-settlement-two-'));
    folders.push(folder);
    const path = join(folder, 'evidence.sqlite');
    const a = await setup({ path });
    // B reads no charge under the key: the household's payment row, say, which A's settlement has
    // not written yet.
    const b = await setup({
      path,
      resolveInDoubt: async () => ({ status: 'failed', reason: 'no charge under that key' }),
    });
    return { a, b };
  }

  it("a retry through B while A is still sending is told to wait: a failure B reads never frees the evidence from under A's call", async () => {
    const { a, b } = await twoInstances();
    const args = payArguments(500, jtiOf('sending'));
    // A's call has reached its rail, which holds its answer.
    const held = deferred();
    a.rail.holdFirst = held.promise;
    const sent = a.pay(args);
    await a.rail.started[0]?.promise;
    const retried = await b.pay(args);
    expect(textOf(retried), 'the retry through B').toBe(PAYMENT_IN_PROGRESS_REASON);
    expect(b.rail.calls).toHaveLength(0);
    expect(await b.store.lookup([jtiOf('sending')], POLICY_NOW_MS)).toMatchObject([
      { state: 'in-doubt', sendingUntil: POLICY_NOW_MS + 60_000 },
    ]);
    held.resolve();
    expect(textOf(await sent)).toBe(receiptText(1));
    // Settled by A: B's retry gets A's receipt, and nothing more is sent anywhere.
    expect(textOf(await b.pay(args))).toBe(receiptText(1));
    expect(b.rail.calls).toHaveLength(0);
  });

  it('a success B reads while A is still sending settles it; A then finds it spent by its own call, which is no fault', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'emcp-settlement-two-'));
    folders.push(folder);
    const path = join(folder, 'evidence.sqlite');
    const receipt: CallToolResult = { content: [{ type: 'text', text: receiptText(1) }] };
    const a = await setup({ path });
    const b = await setup({ path, resolveInDoubt: async () => ({ status: 'completed', result: receipt }) });
    const args = payArguments(500, jtiOf('read-first'));
    const held = deferred();
    a.rail.holdFirst = held.promise;
    const sent = a.pay(args);
    await a.rail.started[0]?.promise;
    expect(await b.pay(args)).toEqual(receipt);
    held.resolve();
    expect(textOf(await sent)).toBe(receiptText(1));
    expect(await a.store.lookup([jtiOf('read-first')], POLICY_NOW_MS)).toMatchObject([{ state: 'spent' }]);
    expect(a.faults).toEqual([]);
  });

  it("once A's sender lease has run out, B settles it as any retry would: a failure the rail reports frees it for a fresh attempt", async () => {
    const { a, b } = await twoInstances();
    const args = payArguments(500, jtiOf('hung'));
    a.rail.mode = 'hang';
    void a.pay(args).catch(() => undefined);
    await a.rail.started[0]?.promise;
    expect(textOf(await b.pay(args))).toBe(PAYMENT_IN_PROGRESS_REASON);
    b.clock.ms += 60_000;
    expect(textOf(await b.pay(args))).toBe(receiptText(1));
    expect(b.rail.calls).toHaveLength(1);
  });
});

describe('in doubt across a crash and a restart', () => {
  const folders: string[] = [];
  afterEach(() => {
    for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
  });

  it('a process killed while its payment is being sent leaves the evidence in doubt; after restart the retry waits, then settles by the hook', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'emcp-settlement-crash-'));
    folders.push(folder);
    const path = join(folder, 'evidence.sqlite');
    const args = payArguments(500, jtiOf('crash'));

    // 1. Another process reserves, passes the policy, marks the evidence in doubt and starts
    //    sending, then is killed before the call ends.
    const child = spawn(process.execPath, [
      '--import',
      'tsx',
      'tests/policy/single-use-crash-worker.ts',
      path,
      JSON.stringify(args),
    ]);
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const line = await lines.next();
    expect(line.done ? `worker exited early: ${stderr}` : line.value).toBe('dispatching');
    child.kill('SIGKILL');
    await exited;

    // 2. The file, reopened, still holds it in doubt long after any lease would have lapsed.
    const later = POLICY_NOW_MS + 10 * 60_000;
    const reopened = openSqliteEvidenceStore({ path, capacity: 1_000 });
    expect(await reopened.lookup([jtiOf('crash')], later)).toMatchObject([{ state: 'in-doubt' }]);
    await reopened.close();

    // 3. The restarted proxy without a resolver: the retry is told to wait, and the rail is not called.
    const restarted = await setup({ path, clockMs: later });
    expect(inProgress(await restarted.pay(args))).toBe(true);
    expect(restarted.rail.calls).toHaveLength(0);

    // 4. With settlement's resolver the retry gets the receipt the rail issued, and it is spent.
    const receipt: CallToolResult = { content: [{ type: 'text', text: 'receipt issued after the crash' }] };
    const settled = await setup({
      path,
      clockMs: later,
      resolveInDoubt: async () => ({ status: 'completed', result: receipt }),
    });
    expect(await settled.pay(args)).toEqual(receipt);
    expect(settled.rail.calls).toHaveLength(0);
    expect(await settled.store.lookup([jtiOf('crash')], later)).toMatchObject([{ state: 'spent' }]);
  });
});
