import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

// The Claude path (SPEC §8) through the real @anthropic-ai/sdk against a local scripted Messages API
// that streams SSE with tool_use blocks: one full $4 order, the loop waiting for the child's passkey.
let api: FakeStreamingMessagesApi;
let h: ChatHousehold;

/** What the scripted model read from earlier tool results. */
const seen: Partial<
  Record<'invoice' | 'invoiceId' | 'merchantId' | 'approvalId' | 'receipt' | 'commitment', string | undefined>
> = {};

/** The scripted model: one step per request, reading ids from the tool results it was sent. */
function script(request: MessagesRequest, index: number): ScriptedMessage {
  const results = lastToolResults(request);
  const text = results.map((result) => result.text).join('\n');
  const field = (name: string) => new RegExp(`"${name}":"([^"]+)"`).exec(text)?.[1];
  switch (index) {
    case 0:
      // A model that skips the search: the discovery gate refuses, fed back as an is_error result.
      return {
        content: [
          { type: 'text', text: 'Let me get that cheese slice for you.' },
          {
            type: 'tool_use',
            name: 'call_tool',
            input: { tool_name: 'pizza__request_invoice', arguments: {} },
          },
        ],
        stopReason: 'tool_use',
      };
    case 1:
      return search('pizza order invoice');
    case 2:
      return call('pizza__request_invoice', { items: [{ sku: 'cheese-slice', qty: 1 }], deliverTo: '12 Main St' });
    case 3:
      seen.invoice = field('invoice');
      seen.invoiceId = field('invoiceId');
      return search('request approval household');
    case 4:
      return call('request_approval', { invoice: seen.invoice });
    case 5:
      seen.approvalId = field('approvalId');
      return search('charge invoice payment');
    case 6:
      return call('payments__charge_invoice', {
        invoiceId: seen.invoiceId,
        amountCents: 400,
        merchantId: seen.merchantId,
        approvalId: seen.approvalId,
      });
    case 7:
      seen.receipt = field('receipt');
      return search('fulfill order');
    case 8:
      return call('pizza__fulfill', { receipt: seen.receipt });
    case 9:
      seen.commitment = field('commitment');
      return search('record fulfillment');
    case 10:
      return call('record_fulfillment', { commitment: seen.commitment });
    default:
      return {
        content: [{ type: 'text', text: 'Paid $4.00. Your cheese slice arrives in about 30 minutes.' }],
        stopReason: 'end_turn',
      };
  }
}

beforeAll(async () => {
  api = await startFakeStreamingMessagesApi(script);
  h = await startChatHousehold({ anthropic: { apiKey: 'test-key', model: 'claude-test', baseURL: api.baseURL } });
  seen.merchantId = h.household.runtime.merchant?.did;
});
afterAll(async () => {
  await h?.close();
  await api?.close();
});

describe('the Claude agent loop', () => {
  it('completes a $4 order: streamed text, the three meta-tools, is_error results, and the loop waits for the passkey', async () => {
    expect(h.chat.planner).toEqual({ kind: 'claude', model: 'claude-test' });
    const chat = await h.session();
    expect(await h.chat.send(chat.sessionId, 'a cheese slice to 12 Main St')).toEqual({ accepted: true });
    const pending = await chat.waitFor(is.approval('pending'));
    expect(pending.requiredRoles).toEqual(['child']);
    // While the household decides, the model is not asked anything: no polling round.
    expect(api.requests).toHaveLength(5);
    await h.approve('child', pending.approvalId);
    expect((await chat.waitFor(is.turnEnded)).reason).toBe('done');

    // Every request streamed, with exactly the proxy's three meta-tools.
    for (const request of api.requests) {
      expect(request.stream).toBe(true);
      expect(request.model).toBe('claude-test');
      expect(request.tools?.map((tool) => tool.name)).toEqual(['search_tools', 'call_tool', 'load_mcp_server']);
    }
    // The refused call went back as an is_error tool result.
    const refused = lastToolResults(api.requests[1] as MessagesRequest);
    expect(refused).toEqual([
      { isError: true, text: expect.stringMatching(/has not been discovered in this session/) },
    ]);
    // The request_approval result carries the household's decision, as await_approval would.
    expect(lastToolResults(api.requests[5] as MessagesRequest)[0]?.text).toMatch(/"status":"approved"/);

    expect(await chat.waitFor(is.order)).toMatchObject({ totalCents: 400, deliverTo: '12 Main St' });
    expect(chat.events.filter(is.receipt).at(-1)).toMatchObject({ amountCents: 400, etaMinutes: 30 });
    expect(await h.household.runtime.identity.store.payments.get(pending.invoiceId)).toMatchObject({
      state: 'succeeded',
    });
    // The chain is complete: the shop's commitment was recorded against the settled order.
    expect((await h.household.runtime.identity.store.identity.approvals.get(pending.approvalId))?.status).toBe(
      'fulfilled',
    );
    // Streamed text: several deltas of one message share its id.
    const final = chat.events.filter((event) => event.type === 'assistant-text').slice(-5);
    expect(new Set(final.map((event) => (event.type === 'assistant-text' ? event.messageId : ''))).size).toBe(1);
    expect(chat.text()).toContain('Paid $4.00. Your cheese slice arrives in about 30 minutes.');
    expect(chat.text()).toContain('Let me get that cheese slice for you.');
  });
});
