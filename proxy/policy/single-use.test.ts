import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import type { CallRequest, CallVerdict, DispatchOutcome } from '../gateway/types';
import type { EvidenceStore } from './evidence-store';
import { PAYMENT_IN_PROGRESS_REASON, singleUseFilter } from './single-use';
import { openSqliteEvidenceStore } from './sqlite-evidence-store';

const context = { principal: { id: 'test' }, scope: { kind: 'session' as const, id: 'unit' } };
const stores: EvidenceStore[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
});

/** An unsigned compact JWS with `jti` and `exp` (single-use reads ids before any policy verifies). */
function evidence(jti: string): string {
  const payload = Buffer.from(JSON.stringify({ jti, exp: 2_000 })).toString('base64url');
  return `e30.${payload}.c2ln`;
}

function call(args: Record<string, unknown>): CallRequest {
  return {
    tool: 'rail__pay',
    toolName: 'pay',
    server: { name: 'rail', admission: 'in-process' },
    arguments: args,
    hasOutputSchema: false,
    credentialFields: ['invoice', 'sessionToken'],
  };
}

function onSuccess(extra: { maxResultBytes?: number; resolveInDoubt?: () => Promise<DispatchOutcome> } = {}) {
  const store = openSqliteEvidenceStore({ path: ':memory:', capacity: 100 });
  stores.push(store);
  return singleUseFilter({
    spend: 'on-success',
    inner: async (): Promise<CallVerdict> => ({ decision: 'allow' }),
    store,
    evidenceFields: ['invoice'],
    now: () => 1_000_000,
    ...extra,
  });
}

async function run(verdict: CallVerdict, outcome: DispatchOutcome): Promise<DispatchOutcome | CallVerdict> {
  if (verdict.decision !== 'allow' || !verdict.wrap) return verdict;
  return verdict.wrap(async () => outcome);
}

const receipt = (text: string): CallToolResult => ({ content: [{ type: 'text', text }] });

describe('singleUseFilter options', () => {
  it('refuses settlement options without spend on-success', () => {
    const store = {} as EvidenceStore;
    expect(() =>
      singleUseFilter({
        inner: async () => ({ decision: 'allow' }),
        store,
        evidenceFields: ['invoice'],
        resolveInDoubt: async () => ({ status: 'unknown', reason: 'n/a' }),
      }),
    ).toThrow(/on-success/);
  });
});

describe('singleUseFilter spend on-success', () => {
  it('the fingerprint leaves out credential fields: a retry with another non-evidence credential is the same call', async () => {
    const filter = onSuccess();
    const args = { amountCents: 500, invoice: evidence('inv-1'), sessionToken: 'first' };
    await run(await filter(call(args), context), { status: 'completed', result: receipt('paid') });
    expect(await filter(call({ ...args, sessionToken: 'second' }), context)).toMatchObject({
      decision: 'deny',
      result: receipt('paid'),
    });
    // Key order does not matter either: the arguments are compared canonically.
    expect(
      await filter(call({ sessionToken: 'x', invoice: evidence('inv-1'), amountCents: 500 }), context),
    ).toMatchObject({ result: receipt('paid') });
  });

  it('a result too large to keep is spent all the same and replayed as a short notice', async () => {
    const filter = onSuccess({ maxResultBytes: 200 });
    const args = { amountCents: 500, invoice: evidence('inv-big') };
    await run(await filter(call(args), context), { status: 'completed', result: receipt('x'.repeat(500)) });
    const again = await filter(call(args), context);
    expect(again).toMatchObject({
      decision: 'deny',
      result: { content: [{ text: expect.stringContaining('too large') }] },
    });
  });

  it('while the first call is being sent, a retry in the same process is told to wait, without asking the host', async () => {
    let asked = 0;
    // A host that would (wrongly, mid-flight) say "no such charge": it must not be consulted.
    const filter = onSuccess({
      resolveInDoubt: async () => {
        asked++;
        return { status: 'failed', reason: 'not found' };
      },
    });
    const args = { amountCents: 500, invoice: evidence('inv-running') };
    const first = await filter(call(args), context);
    if (first.decision !== 'allow' || !first.wrap) throw new Error('expected a wrapped allow');
    let retry: CallVerdict | undefined;
    await first.wrap(async () => {
      retry = await filter(call(args), context);
      return { status: 'completed', result: receipt('paid') };
    });
    expect(retry).toEqual({ decision: 'deny', reason: PAYMENT_IN_PROGRESS_REASON });
    expect(asked).toBe(0);
  });
});
