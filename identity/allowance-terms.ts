import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { z } from 'zod';
import { householdLimitCents } from './approvals';
import { parseJsonObject } from './safe-json';

/** Longest an allowance may run: a year, then the parent signs again. */
export const maxAllowanceSeconds = 366 * 24 * 60 * 60;

/** An IANA time zone name the runtime knows (`Europe/Paris`); a period's bounds are computed in it. */
const timeZone = z
  .string()
  .min(1)
  .max(64)
  .refine((name) => {
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: name });
      return true;
    } catch {
      return false;
    }
  }, 'an IANA time zone name');

const cents = z.number().int().min(1).max(householdLimitCents);
const seconds = z.number().int().min(0).max(1e11);

/**
 * The terms of a standing allowance (docs/human-authority.md "Standing allowances"): which child
 * may order from which merchant, how much an order and how much a period, in which time zone the
 * period is counted, and from when until when. Closed: an unknown field is refused, so nothing is
 * signed that the parent's window did not show.
 */
export const allowanceTermsSchema = z
  .object({
    id: z.string().regex(/^urn:uuid:[0-9a-f-]{36}$/i),
    merchantDid: z.string().min(1).max(200),
    merchantName: z.string().min(1).max(200),
    childDid: z.string().startsWith('did:key:').max(200),
    perOrderCapCents: cents,
    budgetCents: cents,
    period: z.enum(['day', 'week']),
    timeZone,
    /** Seconds since the epoch. */
    notBefore: seconds,
    expiresAt: seconds,
  })
  .strict()
  .refine((terms) => terms.perOrderCapCents <= terms.budgetCents, 'the per-order cap is at most the budget')
  .refine(
    (terms) => terms.expiresAt > terms.notBefore && terms.expiresAt - terms.notBefore <= maxAllowanceSeconds,
    'it ends after it starts, within a year',
  );

/** The terms a parent signs. */
export type AllowanceTerms = z.infer<typeof allowanceTermsSchema>;

/** The terms' RFC 8785 bytes: what the window shows, what the credential carries and what the hash covers. */
export function canonicalTerms(terms: AllowanceTerms): string {
  const text = canonicalize(terms);
  // Terms that passed the schema are strings and integers only: they always have a canonical form.
  if (text === undefined) throw new TypeError('allowance terms have no canonical form');
  return text;
}

/** base64url SHA-256 of the terms' canonical bytes: the parent's passkey challenge (as the call hash). */
export function allowanceHashOf(termsText: string): string {
  return createHash('sha256').update(termsText, 'utf8').digest('base64url');
}

/**
 * Reads canonical terms bytes back: valid terms whose canonical form is exactly these bytes, or
 * `undefined`. Two spellings of the same terms are not both accepted, so the bytes hashed are the
 * only reading of what was signed.
 */
export function parseCanonicalTerms(termsText: string): AllowanceTerms | undefined {
  const value = parseJsonObject(termsText);
  const parsed = allowanceTermsSchema.safeParse(value);
  if (!parsed.success) return undefined;
  return canonicalTerms(parsed.data) === termsText ? parsed.data : undefined;
}

/**
 * The period an instant falls in, in the terms' own time zone (never the server's): the local
 * date `2026-12-03` for a daily budget, the ISO week `2026-W49` for a weekly one.
 */
export function periodKeyOf(terms: Pick<AllowanceTerms, 'period' | 'timeZone'>, at: Date): string {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: terms.timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
  }).formatToParts(at);
  const field = (type: string) => Number(parts.find((part) => part.type === type)?.value);
  const year = field('year');
  const month = field('month');
  const day = field('day');
  if (terms.period === 'day') return `${year}-${pad(month)}-${pad(day)}`;
  // ISO 8601 week: the week with the year's first Thursday is week 1; weeks start on Monday.
  const local = new Date(Date.UTC(year, month - 1, day));
  const weekday = local.getUTCDay() || 7;
  local.setUTCDate(local.getUTCDate() + 4 - weekday);
  const weekYear = local.getUTCFullYear();
  const week = Math.ceil(((local.getTime() - Date.UTC(weekYear, 0, 1)) / 86_400_000 + 1) / 7);
  return `${weekYear}-W${pad(week)}`;
}

function pad(value: number): string {
  return String(value).padStart(2, '0');
}

/** An order an allowance might cover. */
export interface AllowanceOrder {
  readonly merchantDid: string;
  readonly childDid: string;
  readonly totalCents: number;
  /** Seconds since the epoch. */
  readonly now: number;
}

/**
 * Whether verified terms cover an order, given what the period has spent and whether it is
 * revoked; a refusal says why in words, and in one of three codes: `revoked`, `budget-spent` (the
 * period's budget cannot take the order), `not-covered` (anything else).
 */
export type AllowanceCover =
  | { readonly covered: true; readonly remainingCents: number }
  | { readonly covered: false; readonly reason: string; readonly cause: 'revoked' | 'budget-spent' | 'not-covered' };

/**
 * The allowance tier's conditions on verified terms (docs/human-authority.md): the merchant and
 * child are the order's, the total is within the per-order cap, the instant within the window, the
 * allowance not revoked, and the period's remaining budget at least the total.
 */
export function allowanceCovers(
  terms: AllowanceTerms,
  order: AllowanceOrder,
  state: { readonly spentCents: number; readonly revoked: boolean },
): AllowanceCover {
  const refuse = (reason: string, cause: 'revoked' | 'budget-spent' | 'not-covered' = 'not-covered') =>
    ({ covered: false, reason, cause }) as const;
  if (state.revoked) return refuse('the parent revoked the allowance', 'revoked');
  if (order.merchantDid !== terms.merchantDid) return refuse('the allowance is for another merchant');
  if (order.childDid !== terms.childDid) return refuse('the allowance is for another child');
  if (order.now < terms.notBefore) return refuse('the allowance has not started yet');
  if (order.now >= terms.expiresAt) return refuse('the allowance has expired');
  if (order.totalCents > terms.perOrderCapCents) return refuse('the order is over the allowance’s per-order cap');
  const remainingCents = terms.budgetCents - state.spentCents;
  if (order.totalCents > remainingCents)
    return refuse(`the allowance’s ${terms.period === 'day' ? 'daily' : 'weekly'} budget is spent`, 'budget-spent');
  return { covered: true, remainingCents: remainingCents - order.totalCents };
}
