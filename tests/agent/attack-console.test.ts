import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Role } from '../../identity/index';
import { attackMoveNames } from '../../lib/agent/attacks';
import { createChatService } from '../../lib/agent/create-chat-service';
import type { ChatEvent, ChatService } from '../../lib/agent/types';
import type { ChargeRequest } from '../../lib/payments/rail';
import { countingMockRail, type TestHousehold } from '../payments/household';
import { type ChatHousehold, is, readTranscript, startChatHousehold, type Transcript } from './chat-household';

// SPEC §8 attack console, issue 15: every move runs through the real proxy (the real shop over
// stdio, payments under family-spend with single-use evidence) in a fresh MCP session, and is
// refused with the refuser's own words. The rail counts every charge that reaches it: the moves
// add none, and spend no evidence (a real order still pays afterwards).

type AttackEvent = Extract<ChatEvent, { type: 'attack' }>;

let chatHousehold: ChatHousehold;
let household: TestHousehold;
let chat: ChatService;
/** Every charge request that reached the rail. */
let charges: ChargeRequest[];

beforeAll(async () => {
  const counting = countingMockRail();
  charges = counting.charges;
  chatHousehold = await startChatHousehold({ rail: counting.rail });
  ({ household, chat } = chatHousehold);
}, 60_000);

afterAll(async () => {
  await chatHousehold?.close();
});

const session = () => chatHousehold.session();
const approve = (role: Role, approvalId: string) => chatHousehold.approve(role, approvalId);

/** Runs `/attack <move>` as a turn; returns the turn's events and its one 'attack' event. */
async function attack(transcript: Transcript, move: string): Promise<{ events: ChatEvent[]; result: AttackEvent }> {
  const events = await transcript.turn(`/attack ${move}`);
  const results = events.filter((event): event is AttackEvent => event.type === 'attack');
  expect(results, `one attack result for ${move}`).toHaveLength(1);
  expect(events.at(-1)).toMatchObject({ type: 'turn-ended', reason: 'done' });
  return { events, result: results[0] as AttackEvent };
}

/** A whole order in the chat, both passkeys approving: the real artifacts the console reuses. */
async function completeOrder(transcript: Transcript, text: string): Promise<string> {
  const from = transcript.events.length;
  const sent = await chat.send(transcript.sessionId, text);
  expect(sent.accepted).toBe(true);
  const pending = await transcript.waitFor(is.approval('pending'), from);
  for (const role of pending.requiredRoles) await approve(role, pending.approvalId);
  expect((await transcript.waitFor(is.turnEnded, from)).reason).toBe('done');
  expect(transcript.events.slice(from).filter(is.receipt).at(-1)).toMatchObject({ etaMinutes: 30 });
  return pending.invoiceId;
}

const needsHumanEvidence = [
  'replay-spent-approval',
  'tamper-amount',
  'parent-approval-for-another-invoice',
  'child-as-parent',
] as const;

describe('on a new household (nothing approved yet)', () => {
  it('/attack alone lists every move by name', async () => {
    const transcript = await session();
    const events = await transcript.turn('/attack');
    for (const name of attackMoveNames) expect(transcript.text(events)).toContain(`• ${name} — `);
    expect(events.some((event) => event.type === 'tool-call')).toBe(false);
  });

  it('an unknown move is named and the list shown; nothing runs', async () => {
    const transcript = await session();
    const events = await transcript.turn('/attack steal-the-keys');
    expect(transcript.text(events)).toMatch(/There is no attack called "steal-the-keys"\. .*• order-300 — /s);
    expect(events.some((event) => event.type === 'tool-call' || event.type === 'attack')).toBe(false);
  });

  it.each(needsHumanEvidence)('%s says what a person must do first, and calls nothing', async (move) => {
    const transcript = await session();
    const { events, result } = await attack(transcript, move);
    expect(result).toMatchObject({ outcome: 'needs-evidence', charged: false, refusals: [] });
    expect(result.reason).toMatch(/^This household has no .* yet\. Complete an order over \$10\.00 first/);
    expect(events.some((event) => event.type === 'tool-call')).toBe(false);
    expect(charges).toHaveLength(0);
  });
});

describe('after a completed $15 order', () => {
  let orderChat: Transcript;
  let chargedBefore: number;

  beforeAll(async () => {
    orderChat = await session();
    await completeOrder(orderChat, 'a large pepperoni to 12 Main St');
    chargedBefore = charges.length;
    expect(chargedBefore).toBe(1);
  }, 60_000);

  // The chat that ordered has discovered the invoice and payment tools in its own MCP session: a move
  // that borrowed that session would get through. Each move runs in a fresh one, so each is refused.
  const expected: ReadonlyArray<readonly [string, readonly (string | RegExp)[]]> = [
    [
      'call-without-search',
      [
        'Tool "pizza__request_invoice" has not been discovered in this session. Search first: call search_tools, then call_tool with an exact name from its results.',
      ],
    ],
    [
      'order-without-approval',
      ["Refused by the family spending policy: the call is missing `childApproval` (provided by the child's passkey)."],
    ],
    [
      'replay-spent-approval',
      ['This evidence has already been used for a different call. Signed evidence authorises one action'],
    ],
    [
      'tamper-amount',
      ['This evidence has already been used for a different call. Signed evidence authorises one action'],
    ],
    [
      'parent-approval-for-another-invoice',
      ['This evidence has already been used for a different call. Signed evidence authorises one action'],
    ],
    [
      'child-as-parent',
      ['This evidence has already been used for a different call. Signed evidence authorises one action'],
    ],
    [
      'order-300',
      [
        "The approval request was refused: $300.00 is over the household's limit of $200.00: no one in the household can approve it.",
        'Refused by the family spending policy: the call is missing `childApproval`',
      ],
    ],
    [
      'clerk-injection',
      [
        /^The order is outside the shop policy; no invoice was issued\.\n- Item 1 \(large-pepperoni\): \$1\.50 is below the lowest price the shop signs, \$10\.50 \(30% off list \$15\.00\)\.$/,
      ],
    ],
    [
      'load-attacker-server',
      [
        'The server name "payments" belongs to the operator\'s configuration and cannot be loaded at another address; choose another name.',
      ],
    ],
    ['lookalike-tool', ['Tool "pizza__r\u0435quest_invoice" has not been discovered in this session.']],
  ];

  it('the table covers every move', () => {
    expect(expected.map(([move]) => move)).toEqual([...attackMoveNames]);
  });

  it.each(expected)('%s is refused with its own reason, nothing charged', async (move, reasons) => {
    const { events, result } = await attack(orderChat, move);
    expect(result.outcome, result.reason).toBe('refused');
    expect(result.charged).toBe(false);
    expect(result.refusals).toHaveLength(reasons.length);
    reasons.forEach((reason, index) => {
      const refusal = result.refusals[index]?.reason ?? '';
      if (typeof reason === 'string') expect(refusal).toContain(reason);
      else expect(refusal).toMatch(reason);
    });
    expect(result.reason).toBe(result.refusals[0]?.reason);
    // Each refusal is also a refused tool row in the chat, with the same words.
    for (const refusal of result.refusals) {
      expect(
        events.some((event) => event.type === 'tool-result' && event.isError && event.tool === refusal.step),
        refusal.step,
      ).toBe(true);
    }
    // No order card, no approval, no receipt: an attack's invoices are not the chat's orders.
    expect(events.some((event) => ['order', 'approval', 'receipt'].includes(event.type))).toBe(false);
    expect(charges).toHaveLength(chargedBefore);
  });

  it('the look-alike move did discover the real tool first: only the confusable name is refused', async () => {
    const { events } = await attack(orderChat, 'lookalike-tool');
    const search = events.find((event) => event.type === 'tool-result' && event.tool === 'search_tools');
    expect(search).toMatchObject({ isError: false });
    expect(search?.type === 'tool-result' ? search.summary : '').toMatch(/→ [1-9]\d* found/);
  });

  it('the moves spent no evidence: a new order still pays with its own approvals, exactly one new charge', async () => {
    const invoiceId = await completeOrder(orderChat, 'a large pepperoni to 12 Main St');
    expect(charges).toHaveLength(chargedBefore + 1);
    expect(charges.at(-1)).toMatchObject({ invoiceId, amountCents: 1500 });
    chargedBefore = charges.length;
  });
});

describe('against an order approved but not paid yet (the evidence is live)', () => {
  let approvalId: string;
  let invoiceId: string;

  beforeAll(async () => {
    const invoice = (await household.invoice([{ sku: 'large-pepperoni', qty: 1 }])) as {
      invoice: string;
      invoiceId: string;
    };
    invoiceId = invoice.invoiceId;
    approvalId = await household.approve(invoice.invoice);
    expect((await household.runtime.identity.approvals.get(approvalId))?.status).toBe('approved');
  }, 60_000);

  it.each([
    [
      'tamper-amount',
      [
        'Refused by the family spending policy.',
        "set `amountCents` to exactly the invoice's `totalCents`",
        'Why: $1.50 is not the total of the signed invoice (in usd).',
      ],
    ],
    [
      'parent-approval-for-another-invoice',
      [
        'Refused by the family spending policy.',
        'The child approved a different invoice. The parent approved a different invoice.',
      ],
    ],
    ['child-as-parent', ['This evidence has already been used. Signed evidence authorises one action']],
  ])('%s: refused by the policy binding or single-use, in their words', async (move, parts) => {
    const before = charges.length;
    const transcript = await session();
    const { result } = await attack(transcript, move);
    expect(result.outcome, result.reason).toBe('refused');
    for (const part of parts) expect(result.reason).toContain(part);
    expect(result.attempt).toContain('(approved)');
    expect(charges).toHaveLength(before);
  });

  it('afterwards the same approvals still pay: the refused moves spent nothing', async () => {
    const before = charges.length;
    const paid = await household.call(
      'payments__charge_invoice',
      { invoiceId, amountCents: 1500, merchantId: household.runtime.merchant?.did, approvalId },
      'pay charge invoice',
    );
    expect(paid.json, JSON.stringify(paid.result.content)).toMatchObject({ status: 'succeeded', invoiceId });
    expect(charges).toHaveLength(before + 1);
  });
});

describe('whichever planner runs the chat', () => {
  it('/attack is scripted under Claude too: no model call is made (the API address here answers nothing)', async () => {
    const claudeChat = createChatService({
      runtime: household.runtime,
      anthropic: { apiKey: 'sk-ant-test-not-used', baseURL: 'http://127.0.0.1:9' },
    });
    try {
      expect(claudeChat.planner.kind).toBe('claude');
      const transcript = readTranscript(claudeChat, (await claudeChat.createSession()).sessionId);
      const { result } = await attack(transcript, 'load-attacker-server');
      expect(result.outcome).toBe('refused');
      expect(result.reason).toContain('The server name "payments" belongs to the operator\'s configuration');
      expect(transcript.events.some((event) => event.type === 'error')).toBe(false);
      transcript.stop();
    } finally {
      await claudeChat.close();
    }
  });
});
