/** Money as people read it: `$15.00`, never cents. */
export function formatMoney(cents: number): string {
  return `$${(cents / 100).toFixed(2)}`;
}

/** A DID shortened in the middle (`did:key:z6Mk…x3Ab`); the full value goes in a title or copy. */
export function shortDid(did: string): string {
  return did.length <= 24 ? did : `${did.slice(0, 14)}…${did.slice(-4)}`;
}

/** Time left as `m:ss`; zero or less is `0:00`. */
export function formatCountdown(milliseconds: number): string {
  const seconds = Math.max(0, Math.ceil(milliseconds / 1000));
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, '0')}`;
}

/** What the household calls its members (the parent sets them); a member without a name is absent. */
export type MemberNames = Readonly<Partial<Record<'child' | 'parent', string>>>;

/** Why an order approved on the parent's allowance alone was handed to the parent at the charge. */
export interface Handover {
  readonly cause: 'budget-spent' | 'revoked' | 'not-covered';
  readonly period?: 'day' | 'week';
}

/**
 * Why a handed-over order asks the parent after all: "the allowance's budget for today was spent
 * by another order", "the allowance was revoked", "the allowance stopped covering it".
 */
export function handoverReason(handover: Handover): string {
  switch (handover.cause) {
    case 'budget-spent':
      return `the allowance's budget for ${handover.period === 'week' ? 'this week' : 'today'} was spent by another order`;
    case 'revoked':
      return 'the allowance was revoked';
    case 'not-covered':
      return 'the allowance stopped covering it';
  }
}

/** What the chat's card and the child's window say of a handed-over order. */
export function handedOverNotice(handover: Handover, parent: string | undefined): string {
  return `Not paid: ${handoverReason(handover)} before it was paid, so ${parent ?? 'the parent'} must approve it too. Nothing was charged.`;
}

/** `child` → `child's`, for "waiting for the child's passkey". */
export function possessive(role: 'child' | 'parent'): string {
  return `${role}'s`;
}

/** A time as people say it relative to `now` ("just now", "2 minutes ago", "3 hours ago"). */
export function relativeTime(at: number, now: number): string {
  const seconds = Math.round((now - at) / 1000);
  if (seconds < 45) return 'just now';
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} ${minutes === 1 ? 'minute' : 'minutes'} ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `${hours} ${hours === 1 ? 'hour' : 'hours'} ago`;
  const days = Math.round(hours / 24);
  return `${days} days ago`;
}

/**
 * Characters that would make signed text display differently from its bytes (issue 26 item 3):
 * Unicode categories Cc (controls), Cf (format: bidirectional overrides and isolates, zero-width
 * and tag characters), Zl and Zp (line and paragraph separators), and lone surrogates (Cs), which
 * cannot be shown at all.
 */
const hiddenCharacter = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/** One piece of signed text: shown as is, or a hidden character shown as its escape. */
export type SignedTextPart =
  | { readonly kind: 'text'; readonly text: string }
  | {
      readonly kind: 'escape';
      readonly escape: string;
      readonly codePoint: string;
      /** Where the character sits in the text (UTF-16 offset): a stable key for rendering. */
      readonly offset: number;
    };

/** `\u202E` for a BMP character, `\u{E0041}` beyond it: what a person sees instead of the character. */
export function visibleEscape(character: string): string {
  const codePoint = character.codePointAt(0) ?? 0;
  const hex = codePoint.toString(16).toUpperCase().padStart(4, '0');
  return codePoint > 0xffff ? `\\u{${hex}}` : `\\u${hex}`;
}

/**
 * Signed text split into what is shown as is and what is shown as a visible escape, so every
 * character a person approves is on screen: "\u202E12 Main St", never "tS niaM 21".
 */
export function signedTextParts(text: string): SignedTextPart[] {
  const parts: SignedTextPart[] = [];
  let last = 0;
  for (const match of text.matchAll(hiddenCharacter)) {
    const index = match.index ?? 0;
    if (index > last) parts.push({ kind: 'text', text: text.slice(last, index) });
    const codePoint = (match[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0');
    parts.push({ kind: 'escape', escape: visibleEscape(match[0]), codePoint: `U+${codePoint}`, offset: index });
    last = index + match[0].length;
  }
  if (last < text.length) parts.push({ kind: 'text', text: text.slice(last) });
  return parts;
}

/** Signed text as one plain string with every hidden character escaped (for labels and titles). */
export function showSignedText(text: string): string {
  return text.replace(hiddenCharacter, visibleEscape);
}
