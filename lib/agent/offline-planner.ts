import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Role, WaitOutcome } from '../../identity/index';
import { DEFAULT_EVIDENCE_LEASE_MS } from '../../proxy/index';
import { dollars } from './invoice-terms';
import {
  awaitApproval,
  chargeWaitsForApproval,
  type QuotedOrder,
  runTool,
  type ToolOutcome,
  type TurnContext,
} from './tool-runner';
import type { ResumePoint } from './turn-leases';

/** How a turn ended (the 'turn-ended' reasons). */
export type TurnEnd = 'done' | 'error' | 'rounds-exhausted';

/** One requested line as the person said it, before it is matched against the shop's menu. */
export interface SpokenItem {
  readonly qty: number;
  readonly flavor: string;
  readonly size?: 'small' | 'large' | 'slice';
}

/** What the offline planner understood. */
export type Intent =
  | { readonly kind: 'menu' }
  | { readonly kind: 'order'; readonly items: readonly SpokenItem[]; readonly deliverTo?: string }
  | { readonly kind: 'discount'; readonly items: readonly SpokenItem[]; readonly deliverTo?: string }
  | { readonly kind: 'order-again'; readonly deliverTo?: string }
  | { readonly kind: 'cancel' }
  | { readonly kind: 'attack'; readonly move: string }
  | { readonly kind: 'help' };

const numberWords: Readonly<Record<string, number>> = {
  a: 1,
  an: 1,
  one: 1,
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  seven: 7,
  eight: 8,
  nine: 9,
  ten: 10,
  eleven: 11,
  twelve: 12,
  thirteen: 13,
  fourteen: 14,
  fifteen: 15,
  sixteen: 16,
  seventeen: 17,
  eighteen: 18,
  nineteen: 19,
  twenty: 20,
};
const flavors = ['cheese', 'pepperoni', 'hawaiian', 'supreme'] as const;
const counts = `\\d{1,3}|${Object.keys(numberWords).join('|')}`;
/** "[count] [size] flavor[s] [slice|pizza]" | "[count] slice(s) of flavor" | "[count] slice(s)". */
const itemPattern = new RegExp(
  [
    String.raw`(?:\b(${counts})\s+)?(?:\b(small|large|big)\s+)?\b(${flavors.join('|')})s?\b(?:\s+(slices?|pizzas?))?`,
    String.raw`(?:\b(${counts})\s+)?\bslices?\s+of\s+(${flavors.join('|')})\b`,
    String.raw`(?:\b(${counts})\s+)?\b(slices?)\b`,
  ].join('|'),
  'gi',
);

/** Options of {@link runOfflineTurn}. */
export interface OfflineTurnOptions {
  /** Runs an attack-console move (`/attack <move>`; an empty move lists them), in its own fresh MCP session. */
  readonly attack?: (move: string) => Promise<TurnEnd>;
}

/**
 * Reads the demo intents (SPEC §8) deterministically: the menu; slices, small and large pizzas by
 * name with quantities ("twenty large supremes"); a delivery address ("to 12 Main St"); "ask for a
 * discount"; "order again"; and `/attack <move>`.
 */
export function parseIntent(text: string): Intent {
  const trimmed = text.trim();
  // `/attack` alone lists the console's moves (an empty move name).
  const attack = /^\/attack(?:$|\s+(\S*))/i.exec(trimmed);
  if (attack !== null) return { kind: 'attack', move: (attack[1] ?? '').toLowerCase() };
  // The address is what follows "to" when it starts with a house number: "… to 12 Main St".
  const address = /\bto\s+(\d[^,;!?\n]*)/i.exec(trimmed);
  const deliverTo = address?.[1]?.trim().replace(/[.\s]+$/, '') || undefined;
  const rest = address === null ? trimmed : trimmed.slice(0, address.index);
  const items = spokenItems(rest);
  const withAddress = deliverTo === undefined ? {} : { deliverTo };
  if (/\bcancel\b/i.test(rest)) return { kind: 'cancel' };
  if (/\bdiscount|\bdeal\b|\bcheaper\b/i.test(rest)) return { kind: 'discount', items, ...withAddress };
  if (/\bagain\b|\bsame\b|\breorder\b/i.test(rest)) return { kind: 'order-again', ...withAddress };
  if (items.length > 0) return { kind: 'order', items, ...withAddress };
  if (/\bmenu\b|\bprices?\b|\bwhat\b.*\b(have|sell|serve)\b/i.test(rest)) return { kind: 'menu' };
  return { kind: 'help' };
}

function spokenItems(text: string): SpokenItem[] {
  const items: SpokenItem[] = [];
  for (const match of text.matchAll(itemPattern)) {
    const [, count, size, flavor, kind, sliceOfCount, sliceFlavor, sliceCount, slice] = match;
    if (flavor !== undefined) {
      const sizeWord = /^slice/i.test(kind ?? '') ? 'slice' : size?.toLowerCase() === 'big' ? 'large' : size;
      items.push({
        qty: quantity(count),
        flavor: flavor.toLowerCase(),
        ...(sizeWord === undefined ? {} : { size: sizeWord.toLowerCase() as NonNullable<SpokenItem['size']> }),
      });
    } else if (sliceFlavor !== undefined) {
      items.push({ qty: quantity(sliceOfCount), flavor: sliceFlavor.toLowerCase(), size: 'slice' });
    } else if (slice !== undefined) {
      items.push({ qty: quantity(sliceCount), flavor: 'cheese', size: 'slice' });
    }
  }
  return items;
}

function quantity(word: string | undefined): number {
  if (word === undefined) return 1;
  const lower = word.toLowerCase();
  return numberWords[lower] ?? Number.parseInt(lower, 10);
}

/** One menu entry as `get_menu` answers it. */
interface MenuEntry {
  readonly sku: string;
  readonly name: string;
  readonly listPriceCents: number;
}

/** Matches a spoken line to the shop's menu: a slice, the named size, else the largest pizza of that name. */
export function matchMenu(item: SpokenItem, menu: readonly MenuEntry[]): MenuEntry | undefined {
  const named = menu.filter((entry) => `${entry.sku} ${entry.name}`.toLowerCase().includes(item.flavor));
  const isSlice = (entry: MenuEntry) => /slice/i.test(`${entry.sku} ${entry.name}`);
  if (item.size === 'slice') return named.find(isSlice);
  const pizzas = named.filter((entry) => !isSlice(entry));
  if (item.size !== undefined) return pizzas.find((entry) => entry.sku.toLowerCase().startsWith(item.size ?? ''));
  return (
    pizzas.find((entry) => entry.sku.startsWith('large')) ??
    pizzas.find((entry) => entry.sku.startsWith('small')) ??
    pizzas[0] ??
    named[0]
  );
}

/**
 * The offline planner (SPEC §8): no key, no network. It drives the same three meta-tools through
 * the chat's own MCP session that Claude would, searching before every call, so every step goes
 * through the proxy's pipelines (discovery gate, elicitation, policy). Refusals are explained in the
 * words the tools returned. Replies are written as 'assistant-text'.
 */
export async function runOfflineTurn(
  context: TurnContext,
  text: string,
  options: OfflineTurnOptions = {},
): Promise<TurnEnd> {
  const intent = parseIntent(text);
  const say = (message: string) => context.emit({ type: 'assistant-text', messageId: randomUUID(), delta: message });
  switch (intent.kind) {
    case 'help':
      await say(
        'I can show the menu, order for you ("a cheese slice to 12 Main St", "two small cheese", "a large pepperoni"), ask the shop for a discount, order again, or cancel the order. To see how the household refuses hostile moves, type /attack.',
      );
      return 'done';
    case 'attack':
      if (options.attack === undefined) {
        await say('The attack console is not available in this chat.');
        return 'done';
      }
      return options.attack(intent.move);
    case 'menu': {
      const menu = await fetchMenu(context);
      if (!menu.ok) {
        await say(`I couldn't get the menu: ${menu.reason}`);
        return 'done';
      }
      await say(
        `Here is the menu:\n${menu.items.map((item) => `• ${item.name} — ${dollars(item.listPriceCents)}`).join('\n')}`,
      );
      return 'done';
    }
    case 'discount':
      return negotiate(context, intent.items, intent.deliverTo, say);
    case 'cancel':
      return cancelOrder(context, say);
    case 'order-again': {
      const last = context.session.lastOrder;
      if (last === undefined) {
        await say(
          'There\'s no earlier order in this chat to repeat. Tell me what you\'d like, e.g. "a large pepperoni".',
        );
        return 'done';
      }
      const deliverTo = intent.deliverTo ?? last.deliverTo;
      return order(context, { lines: last.lines, ...(deliverTo === undefined ? {} : { deliverTo }) }, say);
    }
    case 'order': {
      const menu = await fetchMenu(context);
      if (!menu.ok) {
        await say(`I couldn't get the menu: ${menu.reason}`);
        return 'done';
      }
      const lines: { sku: string; qty: number }[] = [];
      for (const item of intent.items) {
        const entry = matchMenu(item, menu.items);
        if (entry === undefined) {
          const asked = [
            item.size === 'slice' ? undefined : item.size,
            item.flavor,
            item.size === 'slice' ? 'slice' : '',
          ]
            .filter(Boolean)
            .join(' ');
          await say(
            `The shop has no ${asked} on its menu. It sells: ${menu.items.map((entry) => entry.name).join(', ')}.`,
          );
          return 'done';
        }
        lines.push({ sku: entry.sku, qty: item.qty });
      }
      return order(context, { lines, ...(intent.deliverTo === undefined ? {} : { deliverTo: intent.deliverTo }) }, say);
    }
  }
}

type Say = (message: string) => Promise<unknown>;

/** Searches, then calls `tool` through `call_tool` (the discovery gate lets only searched tools through). */
async function searchAndCall(
  context: TurnContext,
  tool: string,
  query: string,
  args: Record<string, unknown>,
): Promise<ToolOutcome> {
  const found = await runTool(context, { tool: 'search_tools', args: { query } });
  const names = Array.isArray(found.json?.results)
    ? (found.json.results as { name?: unknown }[]).map((result) => result.name)
    : [];
  // A focused query may rank the tool below the cut: widen once, as a person would.
  if (!names.includes(tool))
    await runTool(context, { tool: 'search_tools', args: { query: tool.replaceAll('_', ' '), top_k: 20 } });
  return runTool(context, { tool: 'call_tool', args: { tool_name: tool, arguments: args } });
}

async function fetchMenu(
  context: TurnContext,
): Promise<{ ok: true; items: readonly MenuEntry[] } | { ok: false; reason: string }> {
  const menu = await searchAndCall(context, 'pizza__get_menu', 'pizza menu', {});
  const items = menu.json?.items;
  if (menu.isError || !Array.isArray(items)) return { ok: false, reason: menu.text || 'the shop did not answer' };
  return {
    ok: true,
    items: items.filter(
      (item): item is MenuEntry =>
        typeof item === 'object' && item !== null && typeof item.sku === 'string' && typeof item.name === 'string',
    ),
  };
}

async function negotiate(
  context: TurnContext,
  spoken: readonly SpokenItem[],
  deliverTo: string | undefined,
  say: Say,
): Promise<TurnEnd> {
  let lines: QuotedOrder['lines'] = context.session.lastOrder?.lines ?? [];
  if (spoken.length > 0) {
    const menu = await fetchMenu(context);
    if (!menu.ok) {
      await say(`I couldn't get the menu: ${menu.reason}`);
      return 'done';
    }
    lines = spoken.flatMap((item) => {
      const entry = matchMenu(item, menu.items);
      return entry === undefined ? [] : [{ sku: entry.sku, qty: item.qty }];
    });
  }
  const asked = await searchAndCall(context, 'pizza__negotiate', 'negotiate discount with the shop clerk', {
    message: 'Could you give us a discount on this order?',
    ...(lines.length > 0 ? { items: lines.map(({ sku, qty }) => ({ sku, qty })) } : {}),
  });
  if (asked.isError) {
    await say(`The shop would not quote that: ${asked.text}`);
    return 'done';
  }
  const clerkMessage = typeof asked.json?.clerkMessage === 'string' ? asked.json.clerkMessage : '';
  const proposal = asked.json?.proposal as
    | { items?: { sku: string; qty: number; unitPriceCents: number }[]; totalCents?: number }
    | undefined;
  const proposed = proposal?.items ?? [];
  if (proposed.length === 0) {
    await say(
      `The clerk says: “${clerkMessage}” Tell me what you'd like (e.g. "ask for a discount on two large supremes") and I'll ask for a price on it.`,
    );
    return 'done';
  }
  const address = deliverTo ?? context.session.lastOrder?.deliverTo;
  context.session.lastOrder = {
    lines: proposed.map(({ sku, qty, unitPriceCents }) => ({ sku, qty, unitPriceCents })),
    ...(address === undefined ? {} : { deliverTo: address }),
  };
  await say(
    `The clerk says: “${clerkMessage}” The proposal comes to ${dollars(proposal?.totalCents ?? 0)} — not binding until the shop signs an invoice. Say "order again" and I'll ask for a signed invoice at these prices.`,
  );
  return 'done';
}

/** The whole order of SPEC §9: signed invoice → approval (the loop waits) → charge by reference → fulfil → record. */
async function order(context: TurnContext, quote: QuotedOrder, say: Say): Promise<TurnEnd> {
  // 1. The signed invoice. Without an address the proxy asks the human for it (elicitation).
  const invoiced = await searchAndCall(context, 'pizza__request_invoice', 'pizza order invoice', {
    items: quote.lines.map((line) => ({ ...line })),
    ...(quote.deliverTo === undefined ? {} : { deliverTo: quote.deliverTo }),
  });
  if (invoiced.isError || typeof invoiced.json?.invoice !== 'string') {
    await say(`The shop did not sign an invoice: ${invoiced.text}\nNothing was charged.`);
    return 'done';
  }
  const invoice = invoiced.json.invoice;
  const invoiceId = String(invoiced.json.invoiceId ?? '');
  context.session.lastInvoiceId = invoiceId;
  const terms = invoiced.json.terms as { totalCents?: unknown } | undefined;
  const totalCents = typeof terms?.totalCents === 'number' ? terms.totalCents : 0;
  await say(`The shop signed an invoice for ${dollars(totalCents)}. Asking the household to approve it.`);

  // 2. The household's approval request; the loop waits for the decision.
  const requested = await searchAndCall(context, 'request_approval', 'request approval from the household', {
    invoice,
  });
  const approvalId = requested.json?.approvalId;
  if (requested.isError || typeof approvalId !== 'string') {
    await say(`${requested.text}\nNothing was charged.`);
    return 'done';
  }
  const roles = Array.isArray(requested.json?.requiredRoles) ? (requested.json.requiredRoles as Role[]) : [];
  await say(`Waiting for ${roles.map((role) => `the ${role}'s passkey in the ${role} window`).join(' and ')}.`);
  // From here on the order needs no model: another instance can finish it if this one dies.
  await context.resumable?.({ kind: 'order', approvalId });
  const merchantId = context.merchantDid ?? invoicedMerchant(invoiced);
  const deliverTo = context.session.lastOrder?.deliverTo;
  return settleOrder(context, { approvalId, invoiceId, totalCents, merchantId, deliverTo }, say);
}

/**
 * Finishes an order a turn that died left waiting for the household (docs/scale-out.md, turn
 * leases): its invoice, total and merchant are the approval request's signed terms. Each step is
 * safe to repeat: a charge asked again returns the first receipt, a fulfilment the stored commitment.
 */
export async function resumeOrder(context: TurnContext, point: ResumePoint): Promise<TurnEnd> {
  const say = (message: string) => context.emit({ type: 'assistant-text', messageId: randomUUID(), delta: message });
  const view = await context.approvals.get(point.approvalId);
  if (view === undefined) {
    await say('I picked this order up again, but its approval request no longer exists. Nothing was charged.');
    return 'done';
  }
  const { invoiceId, totalCents, merchantId, deliverTo } = view.terms;
  await say(`Picking up the order of ${dollars(totalCents)} where the agent left off.`);
  return settleOrder(
    context,
    { approvalId: point.approvalId, invoiceId, totalCents, merchantId: context.merchantDid ?? merchantId, deliverTo },
    say,
  );
}

/**
 * How long a payment still being confirmed is asked about again, and how far apart: past the
 * single-use evidence's reservation lease, so a reservation an instance that died while the
 * charge's policy decided has lapsed before the turn gives up (docs/scale-out.md, turn leases).
 */
const inProgressPatienceMs = DEFAULT_EVIDENCE_LEASE_MS + 15_000;
const inProgressWaitMs = 1_000;

/** An order the household was asked to approve: what its charge, fulfilment and words need. */
interface RequestedOrder {
  readonly approvalId: string;
  readonly invoiceId: string;
  readonly totalCents: number;
  readonly merchantId: string;
  readonly deliverTo: string | undefined;
}

/** The order's steps after the approval request: the wait, the charge by reference, the fulfilment and its record. */
async function settleOrder(context: TurnContext, requested: RequestedOrder, say: Say): Promise<TurnEnd> {
  const { approvalId, invoiceId, totalCents, merchantId } = requested;
  const outcome: WaitOutcome = await awaitApproval(context, approvalId);
  if (outcome.status !== 'approved') {
    await say(decisionMessage(outcome));
    return 'done';
  }

  // 3. Pay by reference: the proxy fills in the stored evidence and the policy checks it. A payment
  // still being confirmed (another attempt in flight, such as a dying instance's) is asked about
  // again, as the answer says; a charge asked again returns the first receipt.
  const charge = async () => {
    const call = () =>
      searchAndCall(context, 'payments__charge_invoice', 'charge invoice payment', {
        invoiceId,
        amountCents: totalCents,
        merchantId,
        approvalId,
      });
    let answer = await call();
    const giveUpAt = performance.now() + inProgressPatienceMs;
    while (answer.isError && answer.text.includes('payment_in_progress') && performance.now() < giveUpAt) {
      await delay(inProgressWaitMs, undefined, { signal: context.signal });
      answer = await call();
    }
    return answer;
  };
  let charged = await charge();
  // Approved on the parent's allowance alone, which no longer covers it: the same request now waits
  // for the parent. The loop waits for the parent as for any approval, then pays once more (a
  // request is handed over once, so this happens at most once).
  const waiting = chargeWaitsForApproval(charged);
  if (waiting !== undefined && waiting.approvalId === approvalId) {
    await say(
      `Not paid yet: ${waiting.reason}. Waiting for ${waiting.waitingFor.map((role) => `the ${role}'s passkey in the ${role} window`).join(' and ')}.`,
    );
    const decided = await awaitApproval(context, approvalId);
    if (decided.status !== 'approved') {
      await say(decisionMessage(decided));
      return 'done';
    }
    charged = await charge();
  }
  const receipt = charged.json?.receipt;
  if (charged.isError || typeof receipt !== 'string') {
    await say(`The payment did not go through: ${charged.text}`);
    return 'done';
  }
  const paymentRef = String(charged.json?.paymentRef ?? '');

  // 4. The shop ships against the receipt; its signed commitment completes the evidence chain.
  const fulfilled = await searchAndCall(context, 'pizza__fulfill', 'fulfill the paid order', { receipt });
  if (fulfilled.isError || typeof fulfilled.json?.commitment !== 'string') {
    await say(
      `Paid ${dollars(totalCents)} (payment ${paymentRef}), but the shop did not confirm delivery: ${fulfilled.text}`,
    );
    return 'done';
  }
  const recorded = await searchAndCall(context, 'record_fulfillment', 'record fulfillment commitment', {
    commitment: fulfilled.json.commitment,
  });
  // Done: nothing is left for a successor to finish.
  await context.resumable?.(null);
  const eta = typeof fulfilled.json.etaMinutes === 'number' ? fulfilled.json.etaMinutes : undefined;
  const where = requested.deliverTo;
  await say(
    `Paid ${dollars(totalCents)} (payment ${paymentRef}). The shop signed its commitment to deliver${where ? ` to ${where}` : ''}${eta === undefined ? '' : ` in about ${eta} minutes`}.${recorded.isError ? ` (The commitment could not be recorded: ${recorded.text})` : ''}`,
  );
  return 'done';
}

/**
 * "Cancel my order": the shop's `cancel_order` for this chat's last invoice. The household gates it
 * by `approval_required`: the first call is refused naming the approval request, the loop (not the
 * model) waits for the decision as it does for a payment, then makes the same call once more.
 */
async function cancelOrder(context: TurnContext, say: Say): Promise<TurnEnd> {
  const invoiceId = context.session.lastInvoiceId;
  if (invoiceId === undefined) {
    await say('There is no order in this chat to cancel.');
    return 'done';
  }
  const args = { invoiceId };
  const first = await searchAndCall(context, 'pizza__cancel_order', 'cancel order', args);
  const needed = approvalNeeded(first);
  if (needed === undefined) {
    await say(first.isError ? `The order was not cancelled: ${first.text}` : cancelledText(first));
    return 'done';
  }
  if (context.callApprovals === undefined) {
    await say(`${first.text}`);
    return 'done';
  }
  await say(
    `Cancelling needs ${needed.waitingFor.map((role) => `the ${role}'s passkey in the ${role} window`).join(' and ')}. Waiting.`,
  );
  for (;;) {
    const outcome = await context.callApprovals.wait({
      requestId: needed.requestId,
      timeoutMs: 60_000,
      signal: context.signal,
    });
    if (context.signal.aborted) return 'done';
    if (outcome.status === 'pending') continue;
    if (outcome.status === 'declined' || outcome.status === 'expired') {
      await say(`The order was not cancelled: ${outcome.reason}.`);
      return 'done';
    }
    break;
  }
  const second = await searchAndCall(context, 'pizza__cancel_order', 'cancel order', args);
  await say(second.isError ? `The order was not cancelled: ${second.text}` : cancelledText(second));
  return 'done';
}

/** The approval request a refused gated call names, if that is why it was refused. */
function approvalNeeded(outcome: ToolOutcome): { requestId: string; waitingFor: readonly string[] } | undefined {
  const detail = (outcome.result.structuredContent as { approvalRequired?: unknown } | undefined)?.approvalRequired;
  if (typeof detail !== 'object' || detail === null) return undefined;
  const { requestId, waitingFor } = detail as { requestId?: unknown; waitingFor?: unknown };
  if (typeof requestId !== 'string' || !Array.isArray(waitingFor)) return undefined;
  return { requestId, waitingFor: waitingFor.filter((role): role is string => typeof role === 'string') };
}

function cancelledText(outcome: ToolOutcome): string {
  const note = typeof outcome.json?.note === 'string' ? ` ${outcome.json.note}` : '';
  return `The order is cancelled.${note}`;
}

function invoicedMerchant(invoiced: ToolOutcome): string {
  const terms = invoiced.json?.terms as { merchantId?: unknown } | undefined;
  return typeof terms?.merchantId === 'string' ? terms.merchantId : '';
}

/** A declined or expired request in words, with what to do next. */
export function decisionMessage(outcome: Exclude<WaitOutcome, { status: 'approved' }>): string {
  switch (outcome.status) {
    case 'declined':
      return `The order was declined (${outcome.reason}). Nothing was charged. Say "order again" if you'd like a fresh invoice.`;
    case 'expired':
      return `The invoice expired before every approval was given (${outcome.reason}), so nothing was charged. Say "order again" and I'll ask the shop for a fresh invoice.`;
    case 'pending':
      return `The approval is still waiting for the ${outcome.waitingFor.join(' and the ')}.`;
  }
}
