import { describe, expect, it } from 'vitest';
import { applyChatEvent, type ChatView, emptyChat, pendingApproval, rolesStillNeeded } from '../../app/_ui/chat-model';
import type { ChatEvent, ChatEventBody } from '../../lib/index';

// The chat page folds the session's events into what it draws; a reload replays the same events,
// so the fold must be deterministic and ignore anything it has already applied.
function fold(bodies: readonly ChatEventBody[]): ChatView {
  return bodies.reduce<ChatView>(
    (view, body, index) => applyChatEvent(view, { id: index + 1, at: '2026-01-01T00:00:00Z', ...body } as ChatEvent),
    emptyChat,
  );
}

const order: ChatEventBody = {
  type: 'order',
  invoiceId: 'inv-1',
  merchantName: 'Main Street Pizza',
  merchantDid: 'did:key:z6MkExample',
  items: [{ name: 'Large pepperoni', qty: 1, unitPriceCents: 1500 }],
  totalCents: 1500,
  deliverTo: '12 Main St',
  expiresAt: '2026-01-01T00:05:00Z',
};
const approval = (status: 'pending' | 'fulfilled', approvedRoles: ('child' | 'parent')[]): ChatEventBody => ({
  type: 'approval',
  approvalId: 'ap-1',
  invoiceId: 'inv-1',
  status,
  requiredRoles: ['child', 'parent'],
  approvedRoles,
  approveUrls: { child: '/approve?as=child', parent: '/approve?as=parent' },
});

describe('the chat fold', () => {
  it('joins the deltas of one message, and starts a new bubble for the next', () => {
    const view = fold([
      { type: 'assistant-text', messageId: 'a', delta: 'Hello' },
      { type: 'assistant-text', messageId: 'a', delta: ', world' },
      { type: 'assistant-text', messageId: 'b', delta: 'Next' },
    ]);
    expect(view.items.map((item) => (item.kind === 'assistant' ? item.text : item.kind))).toEqual([
      'Hello, world',
      'Next',
    ]);
  });

  it('ignores an event it has already applied (a replay after reconnect)', () => {
    const view = fold([{ type: 'user-message', text: 'hi' }]);
    const again = applyChatEvent(view, { id: 1, at: '2026-01-01T00:00:00Z', type: 'user-message', text: 'hi' });
    expect(again).toBe(view);
  });

  it('puts a tool result on its call, approvals on their order card, and the receipt after it', () => {
    const view = fold([
      { type: 'turn-started' },
      { type: 'tool-call', callId: 'c1', tool: 'call_tool', summary: 'asked the shop for a signed invoice' },
      { type: 'tool-result', callId: 'c1', tool: 'call_tool', isError: false, summary: 'signed invoice for $15.00' },
      order,
      approval('pending', ['child']),
    ]);
    expect(view.busy).toBe(true);
    expect(view.items[0]).toMatchObject({ kind: 'tool', result: { summary: 'signed invoice for $15.00' } });
    const waiting = pendingApproval(view);
    expect(waiting && rolesStillNeeded(waiting)).toEqual(['parent']);

    // Regression: the receipt comes twice (paid, then with the ETA after fulfilment); it once made two cards.
    const done = [
      { type: 'receipt', invoiceId: 'inv-1', paymentRef: 'pay_1', amountCents: 1500 },
      approval('fulfilled', ['child', 'parent']),
      { type: 'receipt', invoiceId: 'inv-1', paymentRef: 'pay_1', amountCents: 1500, etaMinutes: 30 },
      { type: 'turn-ended', reason: 'done' },
    ] as const;
    const finished = done.reduce<ChatView>(
      (current, body, index) =>
        applyChatEvent(current, { id: view.lastId + index + 1, at: '2026-01-01T00:00:00Z', ...body } as ChatEvent),
      view,
    );
    expect(finished.busy).toBe(false);
    expect(pendingApproval(finished)).toBeUndefined();
    expect(finished.items.map((item) => item.kind)).toEqual(['tool', 'order', 'receipt']);
    expect(finished.items[1]).toMatchObject({ approval: { status: 'fulfilled' }, receipt: { paymentRef: 'pay_1' } });
    expect(finished.items[2]).toMatchObject({ merchantName: 'Main Street Pizza', receipt: { etaMinutes: 30 } });
  });

  it('closes an elicitation form, and says so when a turn ends without finishing', () => {
    const view = fold([
      {
        type: 'elicitation',
        elicitationId: 'f1',
        message: 'Where should we deliver?',
        fields: [{ name: 'deliverTo', title: 'Delivery address', required: true }],
      },
      { type: 'elicitation-closed', elicitationId: 'f1', action: 'decline' },
      { type: 'turn-ended', reason: 'rounds-exhausted' },
    ]);
    expect(view.items[0]).toMatchObject({ kind: 'elicitation', closed: 'decline' });
    expect(view.items[1]).toMatchObject({ kind: 'notice', text: expect.stringContaining('too many steps') });
  });
});
