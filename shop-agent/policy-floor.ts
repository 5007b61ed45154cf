import type { MenuItem } from './menu.js';
import { firstAmbiguousCharacter } from './unambiguous-text.js';

/** The largest discount the shop will ever sign, in percent of list price. */
export const MAX_DISCOUNT_PERCENT = 30;
/** Quantity bounds per line (inclusive). */
export const MIN_QTY = 1;
export const MAX_QTY = 20;
/** The largest order total the shop signs, in cents ($500). */
export const MAX_TOTAL_CENTS = 50_000;
/** The only currency the shop prices in. */
export const CURRENCY = 'usd';

/** One requested line, as asked for by the caller (numbers not yet trusted). */
export type RequestedLine = { sku: string; qty: number; unitPriceCents?: number | undefined };

/** What the floor judges: requested lines, the delivery address, and the caller's optional total and currency. */
export type OrderRequest = {
  items: readonly RequestedLine[];
  /** The address the invoice will carry; judged when given (a negotiation has none yet). */
  deliverTo?: string | undefined;
  totalCents?: number | undefined;
  currency?: string | undefined;
};

/** A priced line as it appears in a signed invoice. */
export type InvoiceLine = {
  sku: string;
  name: string;
  qty: number;
  unitPriceCents: number;
  listPriceCents: number;
};

/** Terms the floor accepted: what may be signed. */
export type Terms = { items: InvoiceLine[]; totalCents: number; currency: typeof CURRENCY };

/** Why a request is outside the floor. */
export type ViolationCode =
  | 'no_items'
  | 'unknown_sku'
  | 'qty_out_of_range'
  | 'invalid_price'
  | 'price_below_floor'
  | 'price_above_list'
  | 'wrong_total'
  | 'total_over_limit'
  | 'wrong_currency'
  | 'ambiguous_text';

/** One violation; `line` is the 0-based index of the offending item when there is one. */
export type Violation = { code: ViolationCode; message: string; line?: number };

/** The floor's verdict: signable terms, or every violation found. */
export type FloorDecision = { ok: true; terms: Terms } | { ok: false; violations: Violation[] };

/** The lowest unit price the shop signs for a list price: ceil(70% of list), in integer math. */
export function floorPriceCents(listPriceCents: number): number {
  return Math.ceil((listPriceCents * (100 - MAX_DISCOUNT_PERCENT)) / 100);
}

const dollars = (cents: number): string => `$${(cents / 100).toFixed(2)}`;

/**
 * The merchant policy floor (SPEC §6): deterministic code, not the clerk, decides what may be
 * signed. Every rule is checked and every violation reported, so the caller can fix all at once.
 */
export function checkPolicyFloor(request: OrderRequest, menu: readonly MenuItem[]): FloorDecision {
  const violations: Violation[] = [];
  const lines: InvoiceLine[] = [];

  // Rule: the signed text reads as it is (issue 26 item 3). A person approves the address and the
  // item names as the window shows them, so none may carry a control, format (bidi override,
  // zero-width, tag) or line/paragraph separator character that makes it display otherwise.
  if (request.deliverTo !== undefined) {
    const found = firstAmbiguousCharacter(request.deliverTo);
    if (found !== undefined) {
      violations.push({
        code: 'ambiguous_text',
        message: `The delivery address contains ${found}, an invisible or control character that would make the signed address read differently from what it says; send the address as plain text.`,
      });
    }
  }

  // Rule: at least one line.
  if (request.items.length === 0) {
    violations.push({ code: 'no_items', message: 'The order has no items.' });
  }

  request.items.forEach((item, line) => {
    // Rule: the item is on the menu.
    const entry = menu.find((candidate) => candidate.sku === item.sku);
    if (entry === undefined) {
      const skus = menu.map((candidate) => candidate.sku).join(', ');
      violations.push({
        code: 'unknown_sku',
        line,
        message: `Item ${line + 1}: "${item.sku.slice(0, 64)}" is not on the menu (choose one of: ${skus}).`,
      });
      return;
    }
    // Rule: the name the invoice will carry reads as it is (a menu the shop misconfigured signs nothing).
    const nameCharacter = firstAmbiguousCharacter(entry.name);
    if (nameCharacter !== undefined) {
      violations.push({
        code: 'ambiguous_text',
        line,
        message: `Item ${line + 1} (${entry.sku}): its menu name contains ${nameCharacter}, an invisible or control character; the shop cannot sign it.`,
      });
    }
    // Rule: qty is an integer in 1..20.
    if (!Number.isInteger(item.qty) || item.qty < MIN_QTY || item.qty > MAX_QTY) {
      violations.push({
        code: 'qty_out_of_range',
        line,
        message: `Item ${line + 1} (${entry.sku}): quantity ${item.qty} must be a whole number from ${MIN_QTY} to ${MAX_QTY}.`,
      });
    }
    // Rule: unit price (list price when not asked) between ceil(70% of list) and list.
    const unitPriceCents = item.unitPriceCents ?? entry.listPriceCents;
    const floor = floorPriceCents(entry.listPriceCents);
    if (!Number.isInteger(unitPriceCents)) {
      violations.push({
        code: 'invalid_price',
        line,
        message: `Item ${line + 1} (${entry.sku}): unit price must be a whole number of cents.`,
      });
    } else if (unitPriceCents < floor) {
      violations.push({
        code: 'price_below_floor',
        line,
        message: `Item ${line + 1} (${entry.sku}): ${dollars(unitPriceCents)} is below the lowest price the shop signs, ${dollars(floor)} (${MAX_DISCOUNT_PERCENT}% off list ${dollars(entry.listPriceCents)}).`,
      });
    } else if (unitPriceCents > entry.listPriceCents) {
      violations.push({
        code: 'price_above_list',
        line,
        message: `Item ${line + 1} (${entry.sku}): ${dollars(unitPriceCents)} is above the list price ${dollars(entry.listPriceCents)}.`,
      });
    }
    lines.push({
      sku: entry.sku,
      name: entry.name,
      qty: item.qty,
      unitPriceCents,
      listPriceCents: entry.listPriceCents,
    });
  });

  // Rule: total = sum of lines (when the caller states a total, it must agree).
  const totalCents = lines.reduce((sum, line) => sum + line.qty * line.unitPriceCents, 0);
  if (request.totalCents !== undefined && request.totalCents !== totalCents) {
    violations.push({
      code: 'wrong_total',
      message: `The stated total ${request.totalCents} cents does not equal the sum of the lines, ${totalCents} cents.`,
    });
  }
  // Rule: total ≤ $500.
  if (totalCents > MAX_TOTAL_CENTS) {
    violations.push({
      code: 'total_over_limit',
      message: `The total ${dollars(totalCents)} is over the shop's limit of ${dollars(MAX_TOTAL_CENTS)} per order.`,
    });
  }
  // Rule: currency usd.
  if (request.currency !== undefined && request.currency !== CURRENCY) {
    violations.push({
      code: 'wrong_currency',
      message: `Currency "${request.currency.slice(0, 16)}" is not accepted; the shop prices in "${CURRENCY}".`,
    });
  }

  if (violations.length > 0) return { ok: false, violations };
  return { ok: true, terms: { items: lines, totalCents, currency: CURRENCY } };
}
