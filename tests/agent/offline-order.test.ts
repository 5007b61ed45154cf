import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatEvent } from '../../lib/agent/types';
import { type ChatHousehold, is, startChatHousehold } from './chat-household';

// SPEC §8/§9 through the chat service with the offline planner: every step goes through this
// session's own MCP session on the real proxy, and the loop (not a model) waits for the passkeys.
let h: ChatHousehold;
beforeAll(async () => {
  h = await startChatHousehold();
});
afterAll(async () => {
  await h?.close();
});

/** The tools the turn called through `call_tool`, in order (searches left out). */
function calls(events: readonly ChatEvent[]): string[] {
  return events.flatMap((event) => (event.type === 'tool-call' && event.tool !== 'search_tools' ? [event.tool] : []));
}

describe('the offline planner drives a whole order', () => {
  it('reports itself as the offline planner', () => {
    expect(h.chat.planner).toEqual({ kind: 'offline' });
  });

  it('"a cheese slice to 12 Main St": the child approves, the turn resumes by itself and completes with the ETA', async () => {
    const chat = await h.session();
    expect(await h.chat.send(chat.sessionId, 'a cheese slice to 12 Main St')).toEqual({ accepted: true });
    const pending = await chat.waitFor(is.approval('pending'));
    expect(pending).toMatchObject({ requiredRoles: ['child'], approvedRoles: [] });
    expect(pending.approveUrls.child).toMatch(/\/approve\?as=child$/);
    // The turn is waiting: a second message is refused while it runs.
    const second = await h.chat.send(chat.sessionId, 'menu');
    expect(second.accepted).toBe(false);
    expect(second.reason).toMatch(/still working/);

    await h.approve('child', pending.approvalId);
    const ended = await chat.waitFor(is.turnEnded);
    expect(ended.reason).toBe('done');

    const order = await chat.waitFor(is.order);
    expect(order).toMatchObject({
      totalCents: 400,
      deliverTo: '12 Main St',
      merchantDid: h.household.runtime.merchant?.did,
      items: [{ name: 'Cheese slice', qty: 1, unitPriceCents: 400 }],
    });
    expect(pending.invoiceId).toBe(order.invoiceId);
    const receipts = chat.events.filter(is.receipt);
    expect(receipts.at(-1)).toMatchObject({ invoiceId: order.invoiceId, amountCents: 400, etaMinutes: 30 });
    expect(chat.events.filter((event) => event.type === 'approval').map((event) => event.status)).toEqual([
      'pending',
      'approved',
      'settled',
      'fulfilled',
    ]);
    expect(calls(chat.events)).toEqual([
      'pizza__get_menu',
      'pizza__request_invoice',
      'request_approval',
      'payments__charge_invoice',
      'pizza__fulfill',
      'record_fulfillment',
    ]);
    expect(chat.text()).toMatch(/Paid \$4\.00 .*deliver to 12 Main St in about 30 minutes/);
    expect(await h.household.runtime.identity.store.payments.get(order.invoiceId)).toMatchObject({
      state: 'succeeded',
      amountCents: 400,
    });
    // Event ids increase by one per session.
    expect(chat.events.map((event) => event.id)).toEqual(chat.events.map((_, index) => index + 1));
  });

  it('"a large pepperoni to 12 Main St" waits for both roles: the child alone is not enough; after both it completes', async () => {
    const chat = await h.session();
    await h.chat.send(chat.sessionId, 'a large pepperoni to 12 Main St');
    const pending = await chat.waitFor(is.approval('pending'));
    expect(pending.requiredRoles).toEqual(['child', 'parent']);

    await h.approve('child', pending.approvalId);
    const childOnly = await chat.waitFor(
      (event) => event.type === 'approval' && event.status === 'pending' && event.approvedRoles.includes('child'),
    );
    expect(childOnly).toMatchObject({ approvedRoles: ['child'] });
    // Still waiting: nothing paid, the turn has not ended.
    expect(chat.events.some((event) => event.type === 'receipt' || event.type === 'turn-ended')).toBe(false);
    expect(await h.household.runtime.identity.store.payments.get(pending.invoiceId)).toBeUndefined();

    await h.approve('parent', pending.approvalId);
    expect((await chat.waitFor(is.turnEnded)).reason).toBe('done');
    expect(chat.events.filter(is.receipt).at(-1)).toMatchObject({ amountCents: 1500, etaMinutes: 30 });
    expect(await h.household.runtime.identity.store.payments.get(pending.invoiceId)).toMatchObject({
      state: 'succeeded',
    });
  });

  it('"twenty large supremes" is refused with the reason and nothing is charged', async () => {
    const chat = await h.session();
    const events = await chat.turn('twenty large supremes to 12 Main St');
    const order = events.find(is.order);
    expect(order?.totalCents).toBe(44_000);
    const refused = events.find((event) => event.type === 'tool-result' && event.tool === 'request_approval');
    expect(refused).toMatchObject({ isError: true });
    expect(chat.text(events)).toMatch(/over the household's limit of \$200\.00/);
    expect(chat.text(events)).toMatch(/Nothing was charged/);
    expect(events.some((event) => event.type === 'receipt' || event.type === 'approval')).toBe(false);
    expect(await h.household.runtime.identity.store.payments.get(order?.invoiceId ?? '')).toBeUndefined();
  });

  it('declining in the child window ends the order with a clear message, nothing charged', async () => {
    const chat = await h.session();
    await h.chat.send(chat.sessionId, 'a cheese slice to 12 Main St');
    const pending = await chat.waitFor(is.approval('pending'));
    const declined = await h.household.runtime.identity.approvals.decline({
      approvalId: pending.approvalId,
      role: 'child',
    });
    expect(declined.ok).toBe(true);
    expect((await chat.waitFor(is.turnEnded)).reason).toBe('done');
    expect(await chat.waitFor(is.approval('declined'))).toMatchObject({ approvalId: pending.approvalId });
    expect(chat.text()).toMatch(/The order was declined .*Nothing was charged\. Say "order again"/);
    expect(chat.events.some((event) => event.type === 'receipt')).toBe(false);
    expect(calls(chat.events)).not.toContain('payments__charge_invoice');
    expect(await h.household.runtime.identity.store.payments.get(pending.invoiceId)).toBeUndefined();
  });

  it('"order again" re-quotes the last order as a new signed invoice', async () => {
    const chat = await h.session();
    const quoteAndDecline = async (text: string) => {
      const from = chat.events.length;
      await h.chat.send(chat.sessionId, text);
      const pending = await chat.waitFor(is.approval('pending'), from);
      await h.household.runtime.identity.approvals.decline({ approvalId: pending.approvalId, role: 'child' });
      await chat.waitFor(is.turnEnded, from);
      return chat.events.slice(from).find(is.order);
    };
    const first = await quoteAndDecline('two small cheese to 12 Main St');
    expect(first).toMatchObject({ totalCents: 1800, items: [{ name: 'Small cheese pizza', qty: 2 }] });
    const again = await quoteAndDecline('order again');
    expect(again).toMatchObject({ totalCents: 1800, deliverTo: '12 Main St', items: first?.items });
    expect(again?.invoiceId).not.toBe(first?.invoiceId);
  });
});

describe('chat sessions', () => {
  it('an attack move gets a fresh MCP session: even after A discovered the tool, calling it unsearched is refused (as in B)', async () => {
    const a = await h.session();
    const b = await h.session();
    // A searches for and gets a signed invoice (refused later, at the approval: no waiting).
    await a.turn('twenty large supremes to 12 Main St');
    for (const chat of [a, b]) {
      const events = await chat.turn('/attack call-without-search');
      const refused = events.find((event) => event.type === 'tool-result');
      expect(refused).toMatchObject({ tool: 'pizza__request_invoice', isError: true });
      expect(events.find((event) => event.type === 'attack')).toMatchObject({
        outcome: 'refused',
        reason: expect.stringMatching(/has not been discovered in this session/),
      });
    }
  });

  it('a reload (a new reader from the last id it saw) gets every later event once, stored then live', async () => {
    const chat = await h.session();
    await h.chat.send(chat.sessionId, 'a cheese slice to 12 Main St');
    const pending = await chat.waitFor(is.approval('pending'));
    // The page reloads having seen a few events less than were logged.
    const seen = pending.id - 3;
    const controller = new AbortController();
    const reloaded: ChatEvent[] = [];
    const reading = (async () => {
      for await (const event of h.chat.events(chat.sessionId, { afterId: seen, signal: controller.signal })) {
        reloaded.push(event);
        if (event.type === 'turn-ended') controller.abort();
      }
    })();
    await h.approve('child', pending.approvalId);
    await reading;
    expect(reloaded.map((event) => event.id)).toEqual(
      Array.from({ length: reloaded.length }, (_, index) => seen + 1 + index),
    );
    await chat.waitFor(is.turnEnded);
    expect(reloaded).toEqual(chat.events.filter((event) => event.id > seen));
  });

  it('refuses unknown sessions and empty messages', async () => {
    expect(await h.chat.hasSession('no-such-session')).toBe(false);
    expect((await h.chat.send('no-such-session', 'menu')).accepted).toBe(false);
    const chat = await h.session();
    expect(await h.chat.hasSession(chat.sessionId)).toBe(true);
    expect(await h.chat.send(chat.sessionId, '   ')).toEqual({ accepted: false, reason: 'The message is empty.' });
    expect(chat.events).toEqual([]);
  });
});

describe('asking for a discount', () => {
  it('asks the clerk through negotiate and says the proposal is not binding; "order again" asks for a signed invoice at it', async () => {
    const chat = await h.session();
    const asked = await chat.turn('ask for a discount on two large supremes to 12 Main St');
    expect(calls(asked)).toEqual(['pizza__get_menu', 'pizza__negotiate']);
    expect(chat.text(asked)).toMatch(/The clerk says: .*not binding until the shop signs an invoice/s);
    const from = chat.events.length;
    await h.chat.send(chat.sessionId, 'order again');
    const pending = await chat.waitFor(is.approval('pending'), from);
    const order = chat.events.slice(from).find(is.order);
    expect(order).toMatchObject({ deliverTo: '12 Main St', items: [{ name: 'Large supreme pizza', qty: 2 }] });
    await h.household.runtime.identity.approvals.decline({ approvalId: pending.approvalId, role: 'child' });
    await chat.waitFor(is.turnEnded, from);
  });
});
