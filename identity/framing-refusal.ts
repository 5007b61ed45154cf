/**
 * Why a WebAuthn ceremony's client data shows it ran inside another site's frame (WebAuthn L3
 * §7.1 step 10 / §7.2 step 14), or `undefined` when it is first-party.
 *
 * Strict on purpose (issue 26 item 10): `crossOrigin` passes only when it is absent or the boolean
 * `false`. A browser sends a boolean; the string `"true"`, `"false"`, `0`, `null` or anything else
 * is not what a conforming client sends, so it proves nothing about the framing and is refused
 * (a truthiness or `=== true` test would let `"true"` through). Any `topOrigin`, whatever its
 * value, means an embedding page; the approval window is never embedded.
 */
export function framingRefusal(clientData: Readonly<Record<string, unknown>>): string | undefined {
  if (Object.hasOwn(clientData, 'crossOrigin') && clientData.crossOrigin !== false) {
    return clientData.crossOrigin === true
      ? 'cross-origin ceremony refused (crossOrigin is true)'
      : 'cross-origin ceremony refused (crossOrigin is not the boolean false)';
  }
  if (Object.hasOwn(clientData, 'topOrigin')) return 'cross-origin ceremony refused (topOrigin present)';
  return undefined;
}
