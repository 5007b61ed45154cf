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

/** `child` → `child's`, for "waiting for the child's passkey". */
export function possessive(role: 'child' | 'parent'): string {
  return `${role}'s`;
}
