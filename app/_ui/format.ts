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
