import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatEvent } from '../../lib/agent/types';
import { countingMockRail } from '../payments/household';
import { signAllowance } from '../payments/sign-allowance';
import { type ChatHousehold, is, startChatHousehold } from './chat-household';
import {
  callStep as call,
  type FakeStreamingMessagesApi,
  lastToolResults,
  type MessagesRequest,
  type ScriptedMessage,
  searchStep as search,
  startFakeStreamingMessagesApi,
} from './fake-streaming-messages-api';

// The Claude path when the parent's allowance stops covering an order the child approved on it
// (docs/human-authority.md, "An order the allowance no longer covers"): the charge answers that
// the same request now waits for the parent, the loop (not the model) waits for the parent's
// passkey, and the model is told to make the same charge once more, which pays it once.
let api: FakeStreamingMessagesApi;
let h: ChatHousehold;
const rail = countingMockRail();
const seen: Partial<Record<'invoice' | 'invoiceId' | 'merchantId' | 'approvalId', string | undefined>> = {};

const say = (text: string): ScriptedMessage => ({ content: [{ type: 'text', text }], stopReason: 'end_turn' });
const charge = () =>
  call('payments__charge_invoice', {
    invoiceId: seen.invoiceId,
    amountCents: 400,
    merchantId: seen.merchantId,
    approvalId: seen.approvalId,
  });

/** The scripted model: it charges again only when the loop says the household approved. */
function script(request: MessagesRequest, index: number): ScriptedMessage {
  const text = lastToolResults(request)
    .map((result) => result.text)
    .join('\n');
  const field = (name: string) => new RegExp(`"${name}":"([^"]+)"`).exec(text)?.[1];
  switch (index) {
    case 0:
      return search('pizza order invoice');
    case 1:
      return call('pizza__request_invoice', { items: [{ sku: 'cheese-slice', qty: 1 }], deliverTo: '12 Main St' });
    case 2:
      seen.invoice = field('invoice');
      seen.invoiceId = field('invoiceId');
      return search('request approval household');
    case 3:
      return call('request_approval', { invoice: seen.invoice });
    case 4:
      seen.approvalId = field('approvalId');
      return search('charge invoice payment');
    case 5:
      return charge();
    case 6:
      return text.includes('make exactly the same payments__charge_invoice call again') ? charge() : say('Stopped.');
    default:
      return say(text.includes('"status":"succeeded"') ? 'Paid $4.00.' : 'Not paid.');
  }
}

beforeAll(async () => {
  api = await startFakeStreamingMessagesApi(script);
  h = await startChatHousehold({
    anthropic: { apiKey: 'test-key', model: 'claude-test', baseURL: api.baseURL },
    rail: rail.rail,
  });
  seen.merchantId = h.household.runtime.merchant?.did;
});
afterAll(async () => {
  await h?.close();
  await api?.close();
});

describe('the Claude agent loop, an allowance revoked before the charge', () => {
  it("waits for the parent's passkey itself, then has the model make the same charge once more", async () => {
    const { allowances, allowanceId } = await signAllowance(h.household);
    const chat = await h.session();
    expect(await h.chat.send(chat.sessionId, 'a cheese slice to 12 Main St')).toEqual({ accepted: true });
    const pending = await chat.waitFor(is.approval('pending'));
    expect(pending).toMatchObject({ requiredRoles: ['child'], allowance: { period: 'day' } });
    // The parent revokes before the child approves: the request, made under the allowance, asks only the child.
    expect(await allowances.revoke(allowanceId)).toMatchObject({ ok: true });
    await h.approve('child', pending.approvalId);

    const handedOver = await chat.waitFor(
      (event: ChatEvent) => event.type === 'approval' && event.status === 'pending' && event.handover !== undefined,
    );
    expect(handedOver).toMatchObject({
      approvalId: pending.approvalId,
      requiredRoles: ['child', 'parent'],
      approvedRoles: ['child'],
      handover: { cause: 'revoked' },
    });
    // The model is not asked anything while the parent decides, and nothing was charged.
    expect(api.requests).toHaveLength(6);
    expect(rail.charges).toEqual([]);
    await h.approve('parent', pending.approvalId);

    expect((await chat.waitFor(is.turnEnded)).reason).toBe('done');
    const [refused] = lastToolResults(api.requests[6] as MessagesRequest);
    expect(refused?.isError).toBe(true);
    expect(refused?.text).toMatch(/pending again, waiting for the parent's passkey/);
    expect(refused?.text).toMatch(/"status":"approved"/);
    expect(chat.events.filter(is.receipt)).toEqual([expect.objectContaining({ amountCents: 400 })]);
    expect(chat.text()).toContain('Paid $4.00.');
    expect(rail.charges.map((request) => request.invoiceId)).toEqual([pending.invoiceId]);
  });
});
