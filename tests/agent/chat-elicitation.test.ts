import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatEvent } from '../../lib/agent/types';
import { type ChatHousehold, is, startChatHousehold, type Transcript } from './chat-household';

// SPEC §3.10 in the chat: an order without an address makes the proxy's elicitation filter ask the
// chat's human through an MCP form on this session; the answer is what the shop signs.
let h: ChatHousehold;
beforeAll(async () => {
  h = await startChatHousehold();
});
afterAll(async () => {
  await h?.close();
});

/** The form, failing clearly (with what the chat said) if the turn ended without asking. */
async function formOrEnd(chat: Transcript): Promise<Extract<ChatEvent, { type: 'elicitation' }>> {
  const first = await chat.waitFor((event) => event.type === 'elicitation' || event.type === 'turn-ended');
  // Needs the runtime's gateway to run the proxy's elicitationFilter (lib/runtime.ts extraCallFilters).
  if (first.type !== 'elicitation') throw new Error(`no elicitation form; the chat said: ${chat.text()}`);
  return first;
}

describe('the elicitation form in the chat', () => {
  it('"a large pepperoni" with no address: the form asks for deliverTo and the answer is on the signed invoice', async () => {
    const chat = await h.session();
    await h.chat.send(chat.sessionId, 'a large pepperoni');
    const form = await formOrEnd(chat);
    expect(form.fields).toEqual([expect.objectContaining({ name: 'deliverTo', required: true })]);
    // A form answer missing the required field is refused and the form stays open.
    expect(
      await h.chat.answerElicitation(chat.sessionId, {
        elicitationId: form.elicitationId,
        action: 'accept',
        content: {},
      }),
    ).toMatchObject({ accepted: false });

    expect(
      await h.chat.answerElicitation(chat.sessionId, {
        elicitationId: form.elicitationId,
        action: 'accept',
        content: { deliverTo: '77 Elm Rd' },
      }),
    ).toEqual({ accepted: true });
    expect(await chat.waitFor((event) => event.type === 'elicitation-closed')).toMatchObject({
      elicitationId: form.elicitationId,
      action: 'accept',
    });
    const order = await chat.waitFor(is.order);
    expect(order).toMatchObject({ deliverTo: '77 Elm Rd', totalCents: 1500 });
    // The approval window reads the same address from the signed invoice.
    const pending = await chat.waitFor(is.approval('pending'));
    expect((await h.household.runtime.identity.approvals.get(pending.approvalId))?.terms.deliverTo).toBe('77 Elm Rd');
    // Answered once: the same form cannot be answered again.
    expect(
      (await h.chat.answerElicitation(chat.sessionId, { elicitationId: form.elicitationId, action: 'cancel' }))
        .accepted,
    ).toBe(false);
    await h.household.runtime.identity.approvals.decline({ approvalId: pending.approvalId, role: 'parent' });
    await chat.waitFor(is.turnEnded);
  });

  it('declining the form signs nothing and says what to do next', async () => {
    const chat = await h.session();
    await h.chat.send(chat.sessionId, 'a cheese slice');
    const form = await formOrEnd(chat);
    await h.chat.answerElicitation(chat.sessionId, { elicitationId: form.elicitationId, action: 'decline' });
    expect((await chat.waitFor(is.turnEnded)).reason).toBe('done');
    expect(chat.events.some((event) => event.type === 'order')).toBe(false);
    expect(chat.text()).toMatch(/The shop did not sign an invoice/);
  });
});
