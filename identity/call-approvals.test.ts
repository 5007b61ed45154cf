import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { callHashOf, type GatedCall, urlWaitMs } from '../proxy/index';
import { assertCall } from '../tests/identity/call-approval-support';
import {
  createIdentityHarness,
  type IdentityHarness,
  openAnotherHandle,
  origin,
  rpId,
} from '../tests/identity/support';
import {
  type CallApprovals,
  callApprovalLifetimeMs,
  createCallApprovals,
  maxPendingCallApprovals,
} from './call-approvals';
import { createPasskeys } from './passkeys';

let harness: IdentityHarness;
let calls: CallApprovals;

beforeEach(async () => {
  harness = await createIdentityHarness();
  calls = createCallApprovals({
    household: harness.household,
    store: harness.householdStore.callApprovals,
    origin,
    rpId,
    clock: harness.clock.now,
  });
});
afterEach(async () => {
  await harness.close();
});

function gated(args: Record<string, unknown>, roles: readonly string[] = ['child']): GatedCall {
  const tool = 'pizza__cancel_order';
  return { tool, arguments: args, callHash: callHashOf({ tool, arguments: args }), roles };
}

async function pending(call: GatedCall) {
  const check = await calls.gate.check(call);
  if (check.status !== 'pending') throw new Error(`expected pending, got ${check.status}`);
  return check;
}

describe('call hash', () => {
  it('is SHA-256 of the RFC 8785 bytes of {"tool", "arguments"}, whatever the key order', () => {
    const a = callHashOf({ tool: 't', arguments: { b: 1, a: 'x' } });
    const b = callHashOf({ tool: 't', arguments: { a: 'x', b: 1 } });
    expect(a).toBe(b);
    expect(Buffer.from(a, 'base64url')).toHaveLength(32);
    expect(callHashOf({ tool: 't', arguments: { a: 'x', b: 2 } })).not.toBe(a);
  });
});

describe('call approvals', () => {
  it('creates one pending request per exact call, with the window URL of each role', async () => {
    const first = await pending(gated({ invoiceId: 'inv-1' }));
    expect(first.waitingFor).toEqual(['child']);
    expect(first.approveUrls).toEqual({ child: `${origin}/approve?as=child&request=${first.requestId}` });
    expect((await pending(gated({ invoiceId: 'inv-1' }))).requestId).toBe(first.requestId);
    expect((await pending(gated({ invoiceId: 'inv-2' }))).requestId).not.toBe(first.requestId);
  });

  it('opens one request when two instances are asked for one call at once, and every check answers with it', async () => {
    // A second instance: its own connection on the same file, its own gate.
    const otherStore = openAnotherHandle(harness);
    try {
      const other = createCallApprovals({
        household: harness.household,
        store: otherStore.callApprovals,
        origin,
        rpId,
        clock: harness.clock.now,
      });
      const call = gated({ invoiceId: 'inv-race' });
      const checks = await Promise.all(
        Array.from({ length: 20 }, (_, index) => (index % 2 === 0 ? calls : other).gate.check(call)),
      );
      const ids = new Set(checks.map((check) => (check.status === 'pending' ? check.requestId : check.status)));
      expect(ids.size).toBe(1);
      const [requestId] = [...ids];
      expect((await otherStore.callApprovals.listPending()).map((record) => record.requestId)).toEqual([requestId]);
      // A check asking other roles of the same call while that one is open is refused, and creates nothing.
      expect(await other.gate.check(gated({ invoiceId: 'inv-race' }, ['parent']))).toEqual({
        status: 'refused',
        reason: 'another request for this call is open; decide it first',
      });
      expect(await harness.householdStore.callApprovals.listPending()).toHaveLength(1);
    } finally {
      otherStore.close();
    }
  });

  it('opens at most maxPendingCallApprovals waiting requests over two instances asked at once, and refuses the rest with the reason', async () => {
    const otherStore = openAnotherHandle(harness);
    try {
      const other = createCallApprovals({
        household: harness.household,
        store: otherStore.callApprovals,
        origin,
        rpId,
        clock: harness.clock.now,
      });
      const checks = await Promise.all(
        Array.from({ length: maxPendingCallApprovals + 10 }, (_, index) =>
          (index % 2 === 0 ? calls : other).gate.check(gated({ invoiceId: `inv-flood-${index}` })),
        ),
      );
      expect(checks.filter((check) => check.status === 'pending')).toHaveLength(maxPendingCallApprovals);
      const refused = checks.filter((check) => check.status === 'refused');
      expect(refused).toHaveLength(10);
      expect(new Set(refused.map((check) => check.reason))).toStrictEqual(
        new Set(['too many calls are waiting for approval; decide those first']),
      );
      expect(await otherStore.callApprovals.listPending()).toHaveLength(maxPendingCallApprovals);
    } finally {
      otherStore.close();
    }
  });

  it('shows every hashed argument, read from the canonical bytes the hash covers', async () => {
    const call = gated({ invoiceId: 'inv-1', reason: 'wrong\u202Eorder', count: 2 });
    const { requestId } = await pending(call);
    const view = await calls.get(requestId);
    expect(view?.callHash).toBe(call.callHash);
    expect(view?.arguments).toEqual([
      { name: 'count', value: '2' },
      { name: 'invoiceId', value: 'inv-1' },
      { name: 'reason', value: 'wrong\u202Eorder' },
    ]);
  });

  it('expires before a v2 SDK client that keeps retrying runs out of rounds, so its last retry is told why', () => {
    // The client's driver retries an input_required round at most 10 times (the default of
    // inputRequired.maxRounds), and the server holds each retry of a URL ask for urlWaitMs.
    const sdkRounds = 10;
    expect(callApprovalLifetimeMs).toBeLessThan(sdkRounds * urlWaitMs);
  });

  it('opens no request whose hash is not the hash of the arguments its window would show', async () => {
    // The passkey signs the stored hash and the window renders the stored arguments: a caller that
    // hands the gate a hash of other arguments (an argument the window would not show) gets nothing
    // to approve.
    const shown = { invoiceId: 'inv-1' };
    const signed = { invoiceId: 'inv-1', refundTo: 'attacker' };
    const mismatched = { ...gated(shown), callHash: gated(signed).callHash };
    expect(await calls.gate.check(mismatched)).toEqual({
      status: 'refused',
      reason: 'the call hash is not the hash of the call',
    });
    expect(await harness.householdStore.callApprovals.listPending()).toEqual([]);
  });

  it("issues a CallApproval over the child's passkey assertion, which verifies against exactly that call", async () => {
    const child = await harness.enrol('child');
    const call = gated({ invoiceId: 'inv-1' });
    const { requestId } = await pending(call);
    const approved = await calls.approve({
      requestId,
      role: 'child',
      assertion: assertCall(child.authenticator, call.callHash),
    });
    expect(approved).toMatchObject({ ok: true, record: { status: 'approved' } });
    const check = await calls.gate.check(call);
    if (check.status !== 'approved') throw new Error(`expected approved, got ${check.status}`);
    const [approval] = check.approvals;
    if (approval === undefined) throw new Error('no approval');
    expect(await calls.gate.verify(call, approval)).toMatchObject({ verified: true });
    // One field changed is another hash: the same approval is refused for it.
    expect(await calls.gate.verify(gated({ invoiceId: 'inv-2' }), approval)).toEqual({
      verified: false,
      reason: "the child's approval: it approves other arguments than this call has",
    });
    // Presented as the parent's, it is the child's.
    expect(
      await calls.gate.verify(gated({ invoiceId: 'inv-1' }, ['parent']), { ...approval, role: 'parent' }),
    ).toMatchObject({
      verified: false,
      reason: "the parent's approval: it is a child approval, not a parent one",
    });
    // Another tool with the same arguments.
    const other = { tool: 'pizza__fulfill', arguments: call.arguments, callHash: call.callHash, roles: ['child'] };
    expect(await calls.gate.verify(other, approval)).toMatchObject({
      verified: false,
      reason: "the child's approval: it approves another tool",
    });
  });

  it('refuses an assertion over another call, and a passkey of another role', async () => {
    const child = await harness.enrol('child');
    const parent = await harness.enrol('parent');
    const call = gated({ invoiceId: 'inv-1' });
    const { requestId } = await pending(call);
    const otherHash = callHashOf({ tool: call.tool, arguments: { invoiceId: 'inv-2' } });
    expect(
      await calls.approve({ requestId, role: 'child', assertion: assertCall(child.authenticator, otherHash) }),
    ).toMatchObject({ ok: false, reason: expect.stringContaining('challenge') });
    expect(
      await calls.approve({ requestId, role: 'child', assertion: assertCall(parent.authenticator, call.callHash) }),
    ).toEqual({ ok: false, reason: 'the passkey is not enrolled for the child' });
    expect((await calls.get(requestId))?.status).toBe('pending');
  });

  it('a declined request is not reused: the next identical call asks again', async () => {
    const call = gated({ invoiceId: 'inv-1' });
    const { requestId } = await pending(call);
    expect(await calls.decline({ requestId, role: 'child' })).toMatchObject({ ok: true });
    expect(await calls.wait({ requestId, timeoutMs: 1 })).toEqual({
      status: 'declined',
      requestId,
      reason: 'the child declined the call',
    });
    expect((await pending(call)).requestId).not.toBe(requestId);
  });

  it('approves through the window’s passkey ceremony, whose challenge is the call hash; another role cannot start it', async () => {
    const passkeys = createPasskeys({
      household: harness.household,
      approvals: harness.approvals,
      callApprovals: calls,
      rpId,
      origin,
      clock: harness.clock.now,
    });
    const child = await harness.enrol('child');
    const parent = await harness.enrol('parent');
    const call = gated({ invoiceId: 'inv-1' });
    const { requestId } = await pending(call);
    expect(await passkeys.call.pendingFor(child.record)).toMatchObject([
      { requestId, action: 'run pizza__cancel_order' },
    ]);
    expect(await passkeys.call.options({ session: parent.record, requestId })).toMatchObject({
      ok: false,
      reason: "this call does not need the parent's approval",
    });
    const started = await passkeys.call.options({ session: child.record, requestId });
    if (!started.ok) throw new Error(started.reason);
    expect(started.options.challenge).toBe(call.callHash);
    const verified = await passkeys.call.verify({
      session: child.record,
      ceremonyId: started.ceremonyId,
      response: child.authenticator.assert(started.options),
    });
    expect(verified).toMatchObject({ verified: true, view: { requestId, status: 'approved' } });
    expect(await calls.gate.check(call)).toMatchObject({ status: 'approved', requestId });
  });

  it('refuses a role the household does not have, creating nothing', async () => {
    expect(await calls.gate.check(gated({ invoiceId: 'inv-1' }, ['admin']))).toMatchObject({ status: 'refused' });
    expect(await harness.householdStore.callApprovals.listPending()).toEqual([]);
  });
});
