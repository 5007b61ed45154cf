import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  FIXTURE_NOW,
  FIXTURE_PAYEE,
  fixtureParty,
  spendCredential,
  spendLimitTrust,
} from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import type { CallContext, CallFilter, CallRequest } from '../../proxy/index';
import {
  createHostBuiltins,
  loadBundle,
  openSqliteEvidenceStore,
  type PolicyDecisionRecord,
  policyFilter,
  singleUseFilter,
} from '../../proxy/policy/index';

const directory = new URL('../../policies/spend-limit', import.meta.url).pathname;
const requester = fixtureParty('requester');
const approver = fixtureParty('approver');
const config = {
  trust: spendLimitTrust(requester, approver),
};
const context: CallContext = { principal: { id: 'test' }, scope: { kind: 'session' as const, id: 'test-session' } };
const now = () => FIXTURE_NOW * 1000;
let jtiCounter = 0;
const request = (amountCents: number, jti = `urn:uuid:req-${++jtiCounter}`) =>
  spendCredential({ issuer: requester, type: 'SpendRequest', amountCents, jti });
const approval = (amountCents: number, jti = `urn:uuid:appr-${++jtiCounter}`) =>
  spendCredential({ issuer: approver, type: 'SpendApproval', amountCents, jti });
const call = (args: Record<string, unknown>): CallRequest => ({
  tool: 'bank__pay',
  toolName: 'pay',
  server: { name: 'bank', admission: 'in-process' },
  arguments: args,
  hasOutputSchema: false,
  credentialFields: ['requesterCredential', 'approverCredential'],
});

/** Stands in for the downstream: records exactly what reached it after the filter. */
function recordingDownstream(filter: CallFilter) {
  const received: Record<string, unknown>[] = [];
  return {
    received,
    async send(callRequest: CallRequest) {
      const verdict = await filter(callRequest, context);
      if (verdict.decision === 'allow') received.push({ ...(verdict.request ?? callRequest).arguments });
      return verdict;
    },
  };
}

describe.each(['rego', 'cel'] as const)('policy filter over the spend-limit bundle (%s)', (engine) => {
  const load = async (records: PolicyDecisionRecord[] = []) =>
    policyFilter({
      bundle: await loadBundle({ directory, builtins: createHostBuiltins(), engine }),
      config,
      now,
      onDecision: (entry) => records.push(entry),
    });

  it('allows a bound requester credential and strips every credential field before the downstream', async () => {
    const downstream = recordingDownstream(await load());
    const verdict = await downstream.send(
      call({ amountCents: 500, payee: FIXTURE_PAYEE, requesterCredential: request(500) }),
    );
    expect(verdict.decision).toBe('allow');
    expect(downstream.received).toEqual([{ amountCents: 500, payee: FIXTURE_PAYEE }]);
  });

  it('strips both credentials on an approved spend', async () => {
    const downstream = recordingDownstream(await load());
    await downstream.send(
      call({
        amountCents: 1500,
        payee: FIXTURE_PAYEE,
        requesterCredential: request(1500),
        approverCredential: approval(1500),
      }),
    );
    expect(downstream.received).toEqual([{ amountCents: 1500, payee: FIXTURE_PAYEE }]);
  });

  it('on deny nothing reaches the downstream, and the reason is rendered guidance without raw check ids', async () => {
    const downstream = recordingDownstream(await load());
    const verdict = await downstream.send(
      call({ amountCents: 1500, payee: FIXTURE_PAYEE, requesterCredential: request(1500) }),
    );
    expect(downstream.received).toEqual([]);
    expect(verdict.decision).toBe('deny');
    const reason = verdict.decision === 'deny' ? verdict.reason : '';
    expect(reason).toContain(
      'Path 2 (the requester plus the approver): provide `approverCredential`, signed by the approver, because $15.00 is over $10.00',
    );
    expect(reason).not.toMatch(/approver_present|within_limit|requester_signature/);
    expect(reason).not.toContain(request(1500).slice(0, 20));
  });

  it('a missing unconditional field denies naming the field and is logged as an error', async () => {
    const records: PolicyDecisionRecord[] = [];
    const filter = await load(records);
    const verdict = await filter(call({ amountCents: 500, payee: FIXTURE_PAYEE }), context);
    expect(verdict).toMatchObject({
      decision: 'deny',
      reason: expect.stringContaining('is missing `requesterCredential`'),
    });
    expect(records.at(-1)?.decision).toBe('error');
  });

  it('an absent guarded credential is omitted and the policy explains what is missing', async () => {
    const filter = await load();
    const verdict = await filter(
      call({ amountCents: 2500, payee: FIXTURE_PAYEE, requesterCredential: request(2500) }),
      context,
    );
    expect(verdict).toMatchObject({ decision: 'deny', reason: expect.stringContaining('No approval was provided') });
  });

  it('an extra argument the policy does not bind fails closed through manifest validation', async () => {
    const downstream = recordingDownstream(await load());
    const verdict = await downstream.send(
      call({
        amountCents: 500,
        payee: FIXTURE_PAYEE,
        requesterCredential: request(500),
        memo: 'also send $500 elsewhere',
      }),
    );
    expect(verdict).toMatchObject({ decision: 'deny', reason: expect.stringContaining('unexpected `memo`') });
    expect(downstream.received).toEqual([]);
  });

  it("manifest validation never replaces the policy's own denial reason", async () => {
    const filter = await load();
    const verdict = await filter(
      call({ amountCents: 1500, payee: FIXTURE_PAYEE, requesterCredential: request(1500), memo: 'x' }),
      context,
    );
    expect(verdict).toMatchObject({ decision: 'deny', reason: expect.stringContaining('Path 2') });
    expect(verdict.decision === 'deny' && verdict.reason).not.toContain('memo');
  });

  it('an engine error denies saying the policy could not be evaluated, and keeps the fault for logs', async () => {
    const records: PolicyDecisionRecord[] = [];
    const filter = policyFilter({
      bundle: await loadBundle({ directory, builtins: createHostBuiltins(), engine }),
      config: {
        trust: { ...config.trust, requester: { did: requester.did, jwk: { kty: 'OKP', crv: 'Ed25519', x: 'AAAA' } } },
      },
      now,
      onDecision: (entry) => records.push(entry),
    });
    const verdict = await filter(
      call({ amountCents: 500, payee: FIXTURE_PAYEE, requesterCredential: request(500) }),
      context,
    );
    expect(verdict).toMatchObject({ decision: 'deny', reason: expect.stringContaining('could not be evaluated') });
    expect(records.at(-1)).toMatchObject({
      decision: 'error',
      error: expect.objectContaining({ code: 'builtin-failed' }),
    });
  });
});

describe('single-use evidence around the policy filter', () => {
  const temporary: string[] = [];
  afterEach(() => {
    for (const path of temporary.splice(0)) rmSync(path, { recursive: true, force: true });
  });
  const storePath = () => {
    const dir = mkdtempSync(join(tmpdir(), 'evidence-'));
    temporary.push(dir);
    return join(dir, 'evidence.sqlite');
  };
  const setup = async (path: string, capacity = 100) => {
    let policyCalls = 0;
    const inner = policyFilter({
      bundle: await loadBundle({ directory, builtins: createHostBuiltins(), engine: 'cel' }),
      config,
      now,
    });
    const counted: CallFilter = async (callRequest, filterContext) => {
      policyCalls++;
      return inner(callRequest, filterContext);
    };
    const store = openSqliteEvidenceStore({ path, capacity });
    const filter = singleUseFilter({
      inner: counted,
      store,
      evidenceFields: ['requesterCredential', 'approverCredential'],
      now,
    });
    return { filter, store, policyCalls: () => policyCalls };
  };

  it('refuses the second use without consulting the policy', async () => {
    const { filter, store, policyCalls } = await setup(storePath());
    const args = { amountCents: 500, payee: FIXTURE_PAYEE, requesterCredential: request(500) };
    expect((await filter(call(args), context)).decision).toBe('allow');
    expect(await filter(call(args), context)).toMatchObject({
      decision: 'deny',
      reason: expect.stringContaining('already been used'),
    });
    expect(policyCalls()).toBe(1);
    await store.close();
  });

  it('a denied call spends nothing', async () => {
    const { filter, store } = await setup(storePath());
    const credential = request(1500);
    const denied = await filter(
      call({ amountCents: 1500, payee: FIXTURE_PAYEE, requesterCredential: credential }),
      context,
    );
    expect(denied.decision).toBe('deny');
    const allowed = await filter(
      call({
        amountCents: 1500,
        payee: FIXTURE_PAYEE,
        requesterCredential: credential,
        approverCredential: approval(1500),
      }),
      context,
    );
    expect(allowed.decision).toBe('allow');
    await store.close();
  });

  it('50 concurrent calls with the same evidence allow exactly one', async () => {
    const { filter, store } = await setup(storePath());
    const args = { amountCents: 500, payee: FIXTURE_PAYEE, requesterCredential: request(500) };
    const verdicts = await Promise.all(Array.from({ length: 50 }, () => filter(call(args), context)));
    expect(verdicts.filter((verdict) => verdict.decision === 'allow')).toHaveLength(1);
    await store.close();
  });

  it('a spent id stays spent after closing and reopening the store', async () => {
    const path = storePath();
    const args = { amountCents: 500, payee: FIXTURE_PAYEE, requesterCredential: request(500) };
    const first = await setup(path);
    expect((await first.filter(call(args), context)).decision).toBe('allow');
    await first.store.close();
    const second = await setup(path);
    expect((await second.filter(call(args), context)).decision).toBe('deny');
    expect(second.policyCalls()).toBe(0);
    await second.store.close();
  });

  it('a full store refuses rather than evicting', async () => {
    const { filter, store } = await setup(storePath(), 2);
    const spend = () =>
      filter(call({ amountCents: 500, payee: FIXTURE_PAYEE, requesterCredential: request(500) }), context);
    expect((await spend()).decision).toBe('allow');
    expect((await spend()).decision).toBe('allow');
    expect(await spend()).toMatchObject({
      decision: 'deny',
      reason: expect.stringContaining('Too much unexpired evidence'),
    });
    await store.close();
  });

  it('entries expire with the evidence', async () => {
    const path = storePath();
    const store = openSqliteEvidenceStore({ path, capacity: 1 });
    const first = await store.reserve([{ id: 'a', expiresAt: 2_000 }], 1_000);
    if (!first.ok) throw new Error('reserve failed');
    await store.commit(first.reservation);
    expect(await store.isSpent('a', 1_500)).toBe(true);
    expect((await store.reserve([{ id: 'b', expiresAt: 9_000 }], 1_500)).ok).toBe(false);
    expect((await store.reserve([{ id: 'b', expiresAt: 9_000 }], 2_000)).ok).toBe(true);
    await store.close();
  });
});
