/** The result of parsing untrusted JSON text: a value, or why it is not JSON. */
export type SafeJsonResult =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly reason: string };

/** Largest JSON text this helper will parse; bigger input is refused before `JSON.parse` sees it. */
export const MAX_JSON_TEXT_LENGTH = 1_000_000;

/** Drops `__proto__` members (a reviver returning undefined deletes the member). */
const withoutProtoKeys = (key: string, inner: unknown): unknown => (key === '__proto__' ? undefined : inner);

/**
 * The one place untrusted JSON text is parsed. Never throws; strips `__proto__` keys so a parsed
 * object can never carry a prototype-polluting key into code that spreads or merges it.
 */
export function safeJsonParse(text: string): SafeJsonResult {
  if (text.length > MAX_JSON_TEXT_LENGTH) return { ok: false, reason: 'JSON text too large' };
  try {
    // A key reads `__proto__` only if the text spells it out or escapes a character of it (`\u`):
    // text with neither is parsed without the reviver, which costs a call per member.
    const mayHaveProtoKey = text.includes('__proto__') || text.includes('\\u');
    const value: unknown = mayHaveProtoKey ? JSON.parse(text, withoutProtoKeys) : JSON.parse(text);
    return { ok: true, value };
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : 'invalid JSON' };
  }
}
