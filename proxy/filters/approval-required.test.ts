import { afterEach, describe, expect, it } from 'vitest';
import type { CallRequest, Elicit, UrlElicitation } from '../gateway/types';
import type { EvidenceStore } from '../policy/evidence-store';
import { openSqliteEvidenceStore } from '../policy/sqlite-evidence-store';
import {
  type ApprovalDecisionRecord,
  approvalRequired,
  approvalRequiredKey,
  type CallApprovalCheck,
  type CallApprovalGate,
  type CallRequestStatus,
  type GatedCall,
} from './approval-required';
import { callHashOf } from './call-hash';

const context = { principal: { id: 'chat:1' }, scope: { kind: 'session' as const, id: 'unit' } };
const stores: EvidenceStore[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
});

function call(args: Record<string, unknown>, tool = 'cancel_order'): CallRequest {
  return {
    tool: `pizza__${tool}`,
    toolName: tool,
    server: { name: 'pizza', admission: 'config' },
    arguments: args,
    hasOutputSchema: false,
    credentialFields: [],
  };
}

/** A gate whose approvals are credentials named after the hash they were given for: it verifies only that hash. */
function fakeGate(options: { approvedHash?: string; role?: string; fault?: boolean }) {
  const seen: GatedCall[] = [];
  const used: string[] = [];
  /** Where request r1 stands for `wait`, and what a window decides on it (`decide`). */
  const r1: { status: CallRequestStatus['status']; callHash: string; reason?: string } = {
    status: 'pending',
    callHash: '',
  };
  const gate: CallApprovalGate = {
    async check(gated): Promise<CallApprovalCheck> {
      seen.push(gated);
      if (options.fault) throw new Error('store down');
      r1.callHash = gated.callHash;
      if (r1.status === 'approved') options.approvedHash = gated.callHash;
      if (options.approvedHash === undefined) {
        return {
          status: 'pending',
          requestId: 'r1',
          waitingFor: gated.roles,
          approveUrls: { child: 'http://localhost:3000/approve?as=child&request=r1' },
          expiresAt: '2026-06-01T10:10:00.000Z',
        };
      }
      return {
        status: 'approved',
        requestId: 'r1',
        approvals: [{ role: options.role ?? 'child', credential: options.approvedHash }],
      };
    },
    async verify(gated, approval) {
      return approval.credential === gated.callHash
        ? { verified: true, id: `jti-${approval.credential}`, expiresAt: 2_000_000 }
        : { verified: false, reason: "the child's approval: it approves other arguments than this call has" };
    },
    async markUsed(requestId) {
      used.push(requestId);
    },
    async wait(requestId) {
      if (requestId !== 'r1') return undefined;
      return r1.status === 'declined' || r1.status === 'expired'
        ? { status: r1.status, callHash: r1.callHash, reason: r1.reason ?? '' }
        : { status: r1.status, callHash: r1.callHash };
    },
  };
  const decide = (status: 'approved' | 'declined', callHash?: string) => {
    r1.status = status;
    if (callHash !== undefined) r1.callHash = callHash;
    if (status === 'declined') r1.reason = 'the child declined the call';
  };
  return { gate, seen, used, decide };
}

function filter(gate: CallApprovalGate | undefined, decisions: ApprovalDecisionRecord[] = []) {
  const store = openSqliteEvidenceStore({ path: ':memory:', capacity: 100 });
  stores.push(store);
  return approvalRequired({
    rules: [{ tool: 'pizza__cancel_*', roles: ['child'] }],
    ...(gate === undefined ? {} : { gate }),
    store,
    now: () => 1_000_000,
    onDecision: (record) => decisions.push(record),
  });
}

const hashOf = (args: Record<string, unknown>) => callHashOf({ tool: 'pizza__cancel_order', arguments: args });

describe('approvalRequired', () => {
  it('lets a call no rule names through without asking anyone', async () => {
    const { gate, seen } = fakeGate({});
    expect(await filter(gate)(call({ invoiceId: 'a' }, 'get_menu'), context)).toEqual({ decision: 'allow' });
    expect(seen).toEqual([]);
  });

  it('refuses a matching call without approval, with the request and its window URL as structured content', async () => {
    const { gate, seen } = fakeGate({});
    const decisions: ApprovalDecisionRecord[] = [];
    const verdict = await filter(gate, decisions)(call({ invoiceId: 'a' }), context);
    expect(seen[0]).toMatchObject({
      tool: 'pizza__cancel_order',
      callHash: hashOf({ invoiceId: 'a' }),
      roles: ['child'],
    });
    if (verdict.decision !== 'deny') throw new Error('expected a refusal');
    expect(verdict.reason).toMatch(/^approval_required: pizza__cancel_order runs only after the child/);
    expect(verdict.result?.structuredContent).toEqual({
      [approvalRequiredKey]: {
        requestId: 'r1',
        waitingFor: ['child'],
        approveUrls: { child: 'http://localhost:3000/approve?as=child&request=r1' },
        expiresAt: '2026-06-01T10:10:00.000Z',
      },
    });
    expect(decisions).toMatchObject([{ decision: 'ask', requestId: 'r1' }]);
  });

  it('forwards once with an approval over exactly this call, and refuses the same approval a second time', async () => {
    const { gate, used } = fakeGate({ approvedHash: hashOf({ invoiceId: 'a' }) });
    const decisions: ApprovalDecisionRecord[] = [];
    const approving = filter(gate, decisions);
    expect(await approving(call({ invoiceId: 'a' }), context)).toEqual({ decision: 'allow' });
    expect(used).toEqual(['r1']);
    expect(decisions.at(-1)).toMatchObject({
      decision: 'allow',
      approvalIds: [`jti-${hashOf({ invoiceId: 'a' })}`],
    });
    expect(await approving(call({ invoiceId: 'a' }), context)).toEqual({
      decision: 'deny',
      reason: 'Refused: this approval has already been used. An approval authorises its call once; ask for a new one.',
    });
  });

  it('refuses an allow the audit chain cannot take, spending nothing', async () => {
    const { gate } = fakeGate({ approvedHash: hashOf({ invoiceId: 'a' }) });
    const store = openSqliteEvidenceStore({ path: ':memory:', capacity: 100 });
    stores.push(store);
    let broken = true;
    const recorded = approvalRequired({
      rules: [{ tool: 'pizza__cancel_order', roles: ['child'] }],
      gate,
      store,
      now: () => 1_000_000,
      onDecision: (record) => {
        if (broken && record.decision === 'allow') throw new Error('audit table full');
      },
    });
    expect(await recorded(call({ invoiceId: 'a' }), context)).toEqual({
      decision: 'deny',
      reason: 'The approval could not be recorded as spent, so the call is refused.',
    });
    broken = false;
    expect(await recorded(call({ invoiceId: 'a' }), context)).toEqual({ decision: 'allow' });
  });

  it('waits for an async record of the allow, and refuses when it rejects, spending nothing', async () => {
    const { gate } = fakeGate({ approvedHash: hashOf({ invoiceId: 'a' }) });
    const store = openSqliteEvidenceStore({ path: ':memory:', capacity: 100 });
    stores.push(store);
    let broken = true;
    const recorded = approvalRequired({
      rules: [{ tool: 'pizza__cancel_order', roles: ['child'] }],
      gate,
      store,
      now: () => 1_000_000,
      // As the household's bus records it: the row is committed (or refused) after a turn of the event loop.
      onDecision: async (record) => {
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (broken && record.decision === 'allow') throw new Error('audit table full');
      },
    });
    expect(await recorded(call({ invoiceId: 'a' }), context)).toEqual({
      decision: 'deny',
      reason: 'The approval could not be recorded as spent, so the call is refused.',
    });
    broken = false;
    expect(await recorded(call({ invoiceId: 'a' }), context)).toEqual({ decision: 'allow' });
  });

  it('refuses an approval over other arguments, and one from another role', async () => {
    const other = fakeGate({ approvedHash: hashOf({ invoiceId: 'b' }) });
    expect(await filter(other.gate)(call({ invoiceId: 'a' }), context)).toMatchObject({
      decision: 'deny',
      reason: expect.stringContaining('it approves other arguments than this call has'),
    });
    const parent = fakeGate({ approvedHash: hashOf({ invoiceId: 'a' }), role: 'parent' });
    expect(await filter(parent.gate)(call({ invoiceId: 'a' }), context)).toMatchObject({
      decision: 'deny',
      reason: "pizza__cancel_order needs the child's approval, and request r1 has none.",
    });
  });

  it('fails closed: no gate, a failing gate, or arguments without a canonical form', async () => {
    expect(await filter(undefined)(call({ invoiceId: 'a' }), context)).toMatchObject({ decision: 'deny' });
    expect(await filter(fakeGate({ fault: true }).gate)(call({ invoiceId: 'a' }), context)).toMatchObject({
      decision: 'deny',
      reason: expect.stringContaining('could not be read'),
    });
    expect(await filter(fakeGate({}).gate)(call({ invoiceId: '\uD800' }), context)).toMatchObject({
      decision: 'deny',
      reason: expect.stringContaining('canonical form'),
    });
  });

  describe('for a client that can open URLs (the input primitive’s URL ask)', () => {
    /** An `elicit` that records each URL ask and answers as `answer` says, after `before` (the person in the window). */
    function urlElicit(answer: 'accept' | 'cancel', before: () => void = () => {}) {
      const asks: UrlElicitation[] = [];
      const elicit: Elicit = async (params) => {
        if (params.mode !== 'url') throw new Error('expected a URL ask');
        asks.push(params);
        before();
        return { action: answer };
      };
      return { asks, elicit };
    }

    it('sends the person to the window of each role still needed, and forwards once they approved it', async () => {
      const fake = fakeGate({});
      const decisions: ApprovalDecisionRecord[] = [];
      const { asks, elicit } = urlElicit('accept', () => fake.decide('approved'));
      expect(await filter(fake.gate, decisions)(call({ invoiceId: 'a' }), { ...context, elicit })).toEqual({
        decision: 'allow',
      });
      expect(asks.map(({ id, pages }) => ({ id, pages }))).toEqual([
        {
          id: 'call-approval/r1',
          pages: {
            child: {
              message:
                'The child approves or declines exactly this call of pizza__cancel_order with their passkey, in their approval window.',
              url: 'http://localhost:3000/approve?as=child&request=r1',
            },
          },
        },
      ]);
      expect(fake.used).toEqual(['r1']);
      expect(decisions.map((entry) => entry.decision)).toEqual(['ask', 'allow']);
    });

    it('answers a decline with the reason, structured, and forwards nothing', async () => {
      const fake = fakeGate({});
      const { elicit } = urlElicit('accept', () => fake.decide('declined'));
      const verdict = await filter(fake.gate)(call({ invoiceId: 'a' }), { ...context, elicit });
      if (verdict.decision !== 'deny') throw new Error('expected a refusal');
      expect(verdict.reason).toBe('Refused: the child declined the call. Nothing was sent.');
      expect(verdict.result).toEqual({
        isError: true,
        content: [{ type: 'text', text: 'Refused: the child declined the call. Nothing was sent.' }],
        structuredContent: { requestId: 'r1', status: 'declined', reason: 'the child declined the call' },
      });
      expect(fake.used).toEqual([]);
    });

    it('keeps today’s refusal with the window URLs when the client does not open them', async () => {
      const fake = fakeGate({});
      const { asks, elicit } = urlElicit('cancel');
      const verdict = await filter(fake.gate)(call({ invoiceId: 'a' }), { ...context, elicit });
      expect(asks).toHaveLength(1);
      expect(verdict).toMatchObject({ decision: 'deny', reason: expect.stringMatching(/^approval_required:/) });
    });

    it('a retry naming a request of this call that was declined since gets the reason, and no new request is made', async () => {
      const fake = fakeGate({});
      fake.decide('declined', hashOf({ invoiceId: 'a' }));
      const verdict = await filter(fake.gate)(call({ invoiceId: 'a' }), { ...context, retryOf: 'call-approval/r1' });
      expect(verdict).toMatchObject({
        decision: 'deny',
        reason: 'Refused: the child declined the call. Nothing was sent.',
      });
      expect(fake.seen).toEqual([]);
      // A declined request of another call is not this call's answer: it is asked afresh.
      const other = await filter(fake.gate)(call({ invoiceId: 'b' }), { ...context, retryOf: 'call-approval/r1' });
      expect(other).toMatchObject({ decision: 'deny', reason: expect.stringMatching(/^approval_required:/) });
    });
  });
});
