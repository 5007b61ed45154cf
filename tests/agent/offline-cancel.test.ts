import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatEvent } from '../../lib/agent/types';
import { callHashOf } from '../../proxy/index';
import { assertCall } from '../identity/call-approval-support';
import { type ChatHousehold, is, startChatHousehold } from './chat-household';

// Issue 29 through the chat service with the offline planner: "cancel my order" is held by
// approval_required for the child; the loop waits for the child's passkey and makes the call again.
let h: ChatHousehold;
beforeAll(async () => {
  h = await startChatHousehold();
});
afterAll(async () => {
  await h?.close();
});

const said = (pattern: RegExp) => (event: ChatEvent) => event.type === 'assistant-text' && pattern.test(event.delta);

describe('the offline planner cancels an order', () => {
  it('"cancel my order" waits for the child’s passkey over the exact call, then cancels once', async () => {
    const chat = await h.session();
    await h.chat.send(chat.sessionId, 'a cheese slice to 12 Main St');
    const pending = await chat.waitFor(is.approval('pending'));
    await h.approve('child', pending.approvalId);
    await chat.waitFor(is.receipt);
    const from = chat.events.length;
    await chat.waitFor(is.turnEnded, from - 1);

    const start = chat.events.length;
    expect(await h.chat.send(chat.sessionId, 'cancel my order')).toEqual({ accepted: true });
    await chat.waitFor(said(/^Cancelling needs the child's passkey in the child window\. Waiting\.$/), start);
    const calls = h.household.runtime.identity.callApprovals;
    const [request] = await calls.pendingFor('child');
    if (request === undefined) throw new Error('no call waits for the child');
    const args = { invoiceId: pending.invoiceId };
    expect(request.arguments).toEqual([{ name: 'invoiceId', value: pending.invoiceId }]);
    const assertion = assertCall(
      h.household.members.child.authenticator,
      callHashOf({ tool: 'pizza__cancel_order', arguments: args }),
    );
    expect(await calls.approve({ requestId: request.requestId, role: 'child', assertion })).toMatchObject({ ok: true });
    const ended = await chat.waitFor(is.turnEnded, start);
    expect(ended.reason).toBe('done');
    expect(chat.text(chat.events.slice(start))).toMatch(/The order is cancelled\. The delivery is stopped\./);
    expect((await calls.get(request.requestId))?.status).toBe('used');
  });
});
