/**
 * `approval_required` end to end (issue 29): the household's real proxy, the real shop as a stdio
 * child, and members' software authenticators enrolled through the real ceremony. The shop's
 * `cancel_order` is gated by the child's passkey over the exact call; it is forwarded only after
 * the passkey, once, and refused with the reason when the approved arguments differ in one field,
 * when the same assertion is used a second time, and when the role is wrong.
 */
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Role } from '../../identity/index';
import { callHashOf } from '../../proxy/index';
import { assertCall } from '../identity/call-approval-support';
import { startTestHousehold, type TestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';

const tool = 'pizza__cancel_order';
let household: TestHousehold;

beforeAll(async () => {
  household = await startTestHousehold();
}, 60_000);
afterAll(async () => {
  await household.close();
});

/** A fresh order at the shop, not delivered: its invoice id. */
async function order(): Promise<string> {
  const { invoiceId } = (await household.invoice([{ sku: 'cheese-slice', qty: 1 }])) as { invoiceId: string };
  return invoiceId;
}

async function cancel(args: Record<string, unknown>): Promise<CallToolResult> {
  return (await household.call(tool, args, 'cancel order')).result;
}

/** The approval request a refused call names. */
function requestOf(result: CallToolResult): { requestId: string; approveUrls: Record<string, string> } {
  const detail = (
    result.structuredContent as { approvalRequired?: { requestId: string; approveUrls: Record<string, string> } }
  )?.approvalRequired;
  if (detail === undefined) throw new Error(`no approval request in: ${textOf(result)}`);
  return detail;
}

/** `role` approves exactly `args` with a passkey assertion over their call hash. */
async function approve(requestId: string, args: Record<string, unknown>, signer: Role = 'child', as: Role = 'child') {
  const assertion = assertCall(household.members[signer].authenticator, callHashOf({ tool, arguments: args }));
  return household.runtime.identity.callApprovals.approve({ requestId, role: as, assertion });
}

describe('approval_required on the shop’s cancel_order', () => {
  it('forwards the call only after the child’s passkey over exactly it, and only once', async () => {
    const invoiceId = await order();
    const args = { invoiceId, reason: 'ordered twice' };
    const refused = await cancel(args);
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/^approval_required: pizza__cancel_order runs only after the child/);
    const { requestId, approveUrls } = requestOf(refused);
    expect(approveUrls).toEqual({ child: `http://localhost:3000/approve?as=child&request=${requestId}` });
    expect(await approve(requestId, args)).toMatchObject({ ok: true, record: { status: 'approved' } });

    const forwarded = await cancel(args);
    expect(forwarded.isError, textOf(forwarded)).toBeFalsy();
    expect(forwarded.structuredContent).toMatchObject({ invoiceId, cancelled: true });
    expect((await household.runtime.identity.callApprovals.get(requestId))?.status).toBe('used');
    // The same call again needs a new approval: the first one was spent.
    const again = await cancel(args);
    expect(requestOf(again).requestId).not.toBe(requestId);
    // The decision is on the audit chain with the approval it spent.
    const rows = await household.runtime.audit.after(0, { filter: { kind: 'approval-decision', outcome: 'allow' } });
    expect(rows.map((row) => row.event.approvalId)).toContain(requestId);
  });

  it('refuses when the approved arguments differ from the call’s in one field', async () => {
    const invoiceId = await order();
    const approved = { invoiceId, reason: 'ordered twice' };
    const { requestId } = requestOf(await cancel(approved));
    expect(await approve(requestId, approved)).toMatchObject({ ok: true });
    // The agent then sends another reason: another hash, so the approval does not apply.
    const changed = await cancel({ invoiceId, reason: 'ordered twice!' });
    expect(changed.isError).toBe(true);
    expect(textOf(changed)).toMatch(/^approval_required:/);
    expect(requestOf(changed).requestId).not.toBe(requestId);
    // Even a lookup that hands the approval to the changed call is refused field by field.
    const store = household.runtime.identity.store.callApprovals;
    const record = await store.get(requestId);
    if (record === undefined) throw new Error('no request');
    const changedHash = callHashOf({ tool, arguments: { invoiceId, reason: 'ordered twice!' } });
    // The store keeps one open request per hash: the changed call's own is closed, so the lookup finds the forged one.
    await store.transition(requestOf(changed).requestId, { from: ['pending'], to: 'expired', now: Date.now() });
    await store.create({ ...record, requestId: 'forged-1', callHash: changedHash, createdAt: Date.now() + 60_000 });
    const forged = await cancel({ invoiceId, reason: 'ordered twice!' });
    expect(forged.isError).toBe(true);
    expect(textOf(forged)).toBe(
      "Refused: the child's approval: it approves other arguments than this call has. Ask for approval of exactly this call.",
    );
  });

  it('refuses the same assertion a second time, also when two identical calls race', async () => {
    const invoiceId = await order();
    const args = { invoiceId };
    const { requestId } = requestOf(await cancel(args));
    expect(await approve(requestId, args)).toMatchObject({ ok: true });
    const record = await household.runtime.identity.store.callApprovals.get(requestId);
    if (record === undefined) throw new Error('no request');
    const [first, second] = await Promise.all([cancel(args), cancel(args)]);
    const outcomes = [first, second].map((result) => (result.isError ? textOf(result) : 'forwarded'));
    expect(outcomes.filter((outcome) => outcome === 'forwarded')).toHaveLength(1);
    // The same approval replayed through a second request row: the ledger has it spent.
    await household.runtime.identity.store.callApprovals.create({
      ...record,
      requestId: 'replayed-1',
      status: 'approved',
      createdAt: Date.now() + 60_000,
    });
    const replayed = await cancel(args);
    expect(textOf(replayed)).toBe(
      'Refused: this approval has already been used. An approval authorises its call once; ask for a new one.',
    );
  });

  it('refuses the wrong role: the parent’s passkey for the child, and a parent approval in the child’s place', async () => {
    const invoiceId = await order();
    const args = { invoiceId };
    const { requestId } = requestOf(await cancel(args));
    expect(await approve(requestId, args, 'parent', 'child')).toEqual({
      ok: false,
      reason: 'the passkey is not enrolled for the child',
    });
    expect(await approve(requestId, args, 'parent', 'parent')).toEqual({
      ok: false,
      reason: 'the parent is not asked to approve this call',
    });
    // A real parent CallApproval over exactly this call, presented as the child's. One request per
    // call is open at a time, so the child's is closed before the parent is asked, and the parent's
    // before the swapped row goes in.
    const gate = household.runtime.identity.callApprovals.gate;
    const store = household.runtime.identity.store.callApprovals;
    const callHash = callHashOf({ tool, arguments: args });
    await store.transition(requestId, { from: ['pending'], to: 'expired', now: Date.now() });
    const asked = await gate.check({ tool, arguments: args, callHash, roles: ['parent'] });
    if (asked.status !== 'pending') throw new Error(asked.status);
    expect(await approve(asked.requestId, args, 'parent', 'parent')).toMatchObject({ ok: true });
    const parentRecord = await store.get(asked.requestId);
    const parentApproval = parentRecord?.approvals.parent;
    if (parentRecord === undefined || parentApproval === undefined) throw new Error('no parent approval');
    await store.transition(asked.requestId, { from: ['approved'], to: 'used', now: Date.now() });
    await store.create({
      ...parentRecord,
      requestId: 'swapped-1',
      requiredRoles: ['child'],
      approvals: { child: parentApproval },
      createdAt: Date.now() + 120_000,
    });
    const swapped = await cancel(args);
    expect(swapped.isError).toBe(true);
    expect(textOf(swapped)).toBe(
      "Refused: the child's approval: it is a parent approval, not a child one. Ask for approval of exactly this call.",
    );
  });
});
