/**
 * Characters that make signed text read differently from what it says (issue 26 item 3): Unicode
 * categories Cc (C0 and C1 controls, e.g. NUL, ESC, newline), Cf (format controls: the
 * bidirectional overrides and isolates such as U+202E RIGHT-TO-LEFT OVERRIDE, zero-width
 * characters, the invisible tag characters U+E0000–E007F), Zl (U+2028 LINE SEPARATOR) and Zp
 * (U+2029 PARAGRAPH SEPARATOR). A person approving "‮12 Main St" sees "tS niaM 21"; an
 * address, a name or a label the shop signs contains none of them.
 */
const AMBIGUOUS = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/** `U+202E` for the first ambiguous character of `text`, or `undefined` when there is none. */
export function firstAmbiguousCharacter(text: string): string | undefined {
  const found = AMBIGUOUS.exec(text)?.[0];
  if (found === undefined) return undefined;
  return `U+${(found.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
}
