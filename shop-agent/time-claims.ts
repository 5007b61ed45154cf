/** Clock skew a verifier allows for `iat`/`nbf` set by another party's clock (SPEC §5.2). */
export const CLOCK_SKEW_SECONDS = 60;

/** Maximum lifetimes (`exp - iat`) per credential type the shop verifies or issues (SPEC §5.2). */
export const MAX_LIFETIME_SECONDS = {
  Invoice: 300,
  PaymentReceipt: 86_400,
} as const;

/** The verdict on a credential's time claims. */
export type TimeClaimsVerdict = { ok: true; expiresAt: number } | { ok: false; reason: string };

/**
 * Bound every time claim of a verified JWT payload (SPEC §5.2): `exp`, `iat` and `nbf` required,
 * `iat`/`nbf` not in the future beyond the skew, `now < exp`, and a lifetime no longer than the
 * type's. A credential without these bounds is open-ended evidence: refused, never defaulted.
 */
export function checkTimeClaims(
  payload: Record<string, unknown>,
  options: { now: Date; maxLifetimeSeconds: number; skewSeconds?: number },
): TimeClaimsVerdict {
  const now = Math.floor(options.now.getTime() / 1000);
  const skew = options.skewSeconds ?? CLOCK_SKEW_SECONDS;
  const { exp, iat, nbf } = payload;
  // Step 1: exp, iat and nbf are present, finite numbers (one claim layout for every JWT-VC; an
  // open-ended or undated credential is refused).
  if (!isSeconds(exp)) return { ok: false, reason: 'it has no valid exp (expiry) claim' };
  if (!isSeconds(iat)) return { ok: false, reason: 'it has no valid iat (issued-at) claim' };
  if (!isSeconds(nbf)) return { ok: false, reason: 'it has no valid nbf (not-before) claim' };
  // Step 2: not issued, and not valid from, a moment in the future beyond the allowed skew.
  if (iat > now + skew) return { ok: false, reason: 'its iat (issued-at) claim is in the future' };
  if (nbf > now + skew) return { ok: false, reason: 'it is not valid yet (nbf)' };
  // Step 3: not expired (strict: exp is the issuer's promise, not the verifier's clock).
  if (now >= exp) return { ok: false, reason: 'it has expired' };
  // Step 4: a lifetime no longer than the type's maximum.
  if (exp <= iat) return { ok: false, reason: 'its exp (expiry) is not after its iat (issued-at)' };
  if (exp - iat > options.maxLifetimeSeconds) {
    return { ok: false, reason: `its lifetime is longer than the ${options.maxLifetimeSeconds} s allowed` };
  }
  return { ok: true, expiresAt: exp };
}

function isSeconds(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 && value < 1e11;
}
