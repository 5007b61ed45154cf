import { describe, expect, it } from 'vitest';
import type { ApprovalView, WaitOutcome } from '../../identity/index';
import { createEventBus } from '../events';
import type { McpSession } from './mcp-session';
import { awaitApproval, type TurnContext } from './tool-runner';
import type { ChatEventBody } from './types';

/** A request whose state the test moves by hand; `wait` wakes only when aborted (no timers fire in time). */
function fakeApprovals() {
  let view: ApprovalView = {
    approvalId: 'ap-1',
    status: 'pending',
    terms: {
      invoiceId: 'inv-1',
      merchantId: 'did:key:shop',
      merchantName: 'Main Street Pizza',
      items: [
        { sku: 'large-pepperoni', name: 'Large pepperoni pizza', qty: 1, unitPriceCents: 1500, listPriceCents: 1500 },
      ],
      totalCents: 1500,
      currency: 'usd',
      deliverTo: '12 Main St',
    },
    requiredRoles: ['child', 'parent'],
    approvedRoles: [],
    expiresAt: '2030-01-01T00:05:00.000Z',
    members: { child: 'Sam' },
  };
  const waits: AbortSignal[] = [];
  let waited: () => void = () => undefined;
  return {
    set(next: Partial<ApprovalView>) {
      view = { ...view, ...next };
    },
    /** Resolves once the loop is waiting (its next wait call). */
    nextWait: () =>
      new Promise<void>((resolve) => {
        waited = resolve;
      }),
    approvals: {
      get: async () => view,
      wait: async ({ signal, timeoutMs }: { approvalId: string; timeoutMs: number; signal?: AbortSignal }) => {
        if (view.status === 'pending' && timeoutMs > 1 && signal) {
          waits.push(signal);
          waited();
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        }
        const outcome: WaitOutcome =
          view.status === 'expired'
            ? { status: 'expired', approvalId: 'ap-1', reason: 'the invoice expired before every approval was given' }
            : { status: 'pending', approvalId: 'ap-1', waitingFor: ['parent'] };
        return outcome;
      },
    },
    waits,
  };
}

describe('awaitApproval', () => {
  it('wakes on each identity event about the request, emits every change once, and returns the expiry', async () => {
    const fake = fakeApprovals();
    const events = createEventBus();
    const emitted: ChatEventBody[] = [];
    const context: TurnContext = {
      session: {
        sessionId: 's',
        mcp: {} as McpSession,
        approveUrls: new Map([['ap-1', { child: 'http://localhost:3000/approve?as=child' }]]),
        invoiceApprovals: new Map(),
        payments: new Map(),
        approvalStates: new Map(),
      },
      emit: async (body) => {
        emitted.push(body);
        return { id: emitted.length, at: new Date().toISOString(), ...body };
      },
      signal: new AbortController().signal,
      approvals: fake.approvals,
      events,
      merchantDid: 'did:key:shop',
    };
    let waiting = fake.nextWait();
    const outcome = awaitApproval(context, 'ap-1');
    await waiting;
    // An event about another request does not wake the loop; this one's does.
    events.emit({ source: 'identity', kind: 'approval-approved', outcome: 'allow', approvalId: 'other', message: 'x' });
    expect(fake.waits.at(-1)?.aborted).toBe(false);
    waiting = fake.nextWait();
    fake.set({ approvedRoles: ['child'] });
    events.emit({
      source: 'identity',
      kind: 'approval-approved',
      outcome: 'allow',
      approvalId: 'ap-1',
      message: 'child',
    });
    await waiting;
    fake.set({ status: 'expired', reason: 'the invoice expired before every approval was given' });
    events.emit({
      source: 'identity',
      kind: 'approval-expired',
      outcome: 'deny',
      approvalId: 'ap-1',
      message: 'expired',
    });
    expect(await outcome).toMatchObject({ status: 'expired', reason: expect.stringMatching(/expired/) });
    expect(emitted.map((body) => (body.type === 'approval' ? [body.status, body.approvedRoles] : body.type))).toEqual([
      ['pending', []],
      ['pending', ['child']],
      ['expired', ['child']],
    ]);
    expect(emitted[0]).toMatchObject({
      invoiceId: 'inv-1',
      approveUrls: { child: 'http://localhost:3000/approve?as=child' },
      // The household's name for the child reaches the chat's card with the request.
      members: { child: 'Sam' },
    });
  });
});
