import type { CallContext, CallFilter, CallRequest, CallVerdict } from '../gateway/types';
import type { EvidenceId, EvidenceStore } from './evidence-store';
import { safeJsonParse } from './safe-json';

/** Options for {@link singleUseFilter}. */
export interface SingleUseFilterOptions {
  /** The policy filter this wraps. */
  readonly inner: CallFilter;
  readonly store: EvidenceStore;
  /** Argument names carrying single-use JWS evidence (`invoice`, `childApproval`, `parentApproval`); absent ones are skipped. */
  readonly evidenceFields: readonly string[];
  /** Milliseconds since the epoch. */
  readonly now?: () => number;
  /** Receives store faults for logs. */
  readonly onError?: (error: unknown) => void;
  /**
   * The longest an evidence's `exp` may lie ahead of now, in milliseconds (default
   * {@link DEFAULT_MAX_EVIDENCE_LIFETIME_MS}). Evidence claiming to live longer is refused
   * before the store is touched.
   */
  readonly maxLifetimeMs?: number;
}

/**
 * 24 hours plus 60 s of clock skew: the longest-lived single-use evidence SPEC §5.2 issues
 * (`PaymentReceipt`, `FulfilmentCommitment`); invoices and approvals live minutes.
 */
export const DEFAULT_MAX_EVIDENCE_LIFETIME_MS = 24 * 60 * 60 * 1000 + 60 * 1000;

/**
 * Single-use evidence (SPEC §4.7): keys on the `jti` inside each signed payload. An id already
 * spent denies without consulting the policy; ids are reserved atomically before the inner filter
 * runs, committed only if it allows, and released if it denies or throws — a refused call spends nothing.
 */
export function singleUseFilter(options: SingleUseFilterOptions): CallFilter {
  const now = options.now ?? Date.now;
  const maxLifetimeMs = options.maxLifetimeMs ?? DEFAULT_MAX_EVIDENCE_LIFETIME_MS;
  return async function singleUse(request: CallRequest, context: CallContext): Promise<CallVerdict> {
    // 1. Read each evidence id. The payload is not verified yet: a forged id can only cause a refusal,
    //    and nothing is spent unless the policy (which verifies the signature) allows.
    const ids: EvidenceId[] = [];
    const checkedAt = now();
    for (const field of options.evidenceFields) {
      const value = Object.hasOwn(request.arguments, field) ? request.arguments[field] : undefined;
      if (value === undefined || value === null) continue;
      const evidence = evidenceIdOf(value);
      if (!evidence)
        return {
          decision: 'deny',
          reason: `\`${field}\` is not single-use evidence (a signed credential with jti and exp).`,
        };
      // An `exp` far ahead (1e16 s) is no evidence anyone issues, and would not fit the store's
      // expiry column: refuse it for what it is, before the store is touched.
      if (!(evidence.expiresAt - checkedAt <= maxLifetimeMs))
        return {
          decision: 'deny',
          reason:
            `\`${field}\` claims an implausibly long lifetime (its exp is more than ` +
            `${describeDuration(maxLifetimeMs)} ahead), so it is not accepted as single-use evidence. Obtain fresh evidence.`,
        };
      ids.push(evidence);
    }
    if (ids.length === 0) return options.inner(request, context);
    // 2. Atomic check-and-hold.
    let reserved: Awaited<ReturnType<EvidenceStore['reserve']>>;
    try {
      reserved = await options.store.reserve(ids, now());
    } catch (error) {
      options.onError?.(error);
      return { decision: 'deny', reason: 'The single-use evidence store is unavailable, so the call is refused.' };
    }
    if (!reserved.ok) {
      return reserved.reason === 'full'
        ? {
            decision: 'deny',
            reason: 'Too much unexpired evidence is being tracked right now; the call is refused. Try again later.',
          }
        : {
            decision: 'deny',
            reason:
              'This evidence has already been used. Signed evidence authorises one action; obtain fresh approval.',
          };
    }
    // 3. The policy decides; commit on allow, release otherwise (including a throwing inner filter).
    let verdict: CallVerdict;
    try {
      verdict = await options.inner(request, context);
    } catch (error) {
      await options.store
        .release(reserved.reservation)
        .catch((releaseError: unknown) => options.onError?.(releaseError));
      throw error;
    }
    if (verdict.decision !== 'allow') {
      await options.store
        .release(reserved.reservation)
        .catch((releaseError: unknown) => options.onError?.(releaseError));
      return verdict;
    }
    try {
      await options.store.commit(reserved.reservation);
    } catch (error) {
      options.onError?.(error);
      return { decision: 'deny', reason: 'The evidence could not be recorded as spent, so the call is refused.' };
    }
    return verdict;
  };
}

/** "24 hours", "15 minutes" or "90 seconds" (rounded down), for refusal messages. */
function describeDuration(milliseconds: number): string {
  const seconds = Math.floor(milliseconds / 1000);
  if (seconds >= 3600) return `${Math.floor(seconds / 3600)} hours`;
  if (seconds >= 60) return `${Math.floor(seconds / 60)} minutes`;
  return `${seconds} seconds`;
}

/** `{id: jti, expiresAt: exp}` from a compact JWS payload, or undefined when it has neither. */
function evidenceIdOf(value: unknown): EvidenceId | undefined {
  if (typeof value !== 'string') return undefined;
  const payload = value.split('.')[1];
  if (payload === undefined || !/^[A-Za-z0-9_-]+$/.test(payload)) return undefined;
  const parsed = safeJsonParse(Buffer.from(payload, 'base64url').toString('utf8'));
  if (!parsed.ok || typeof parsed.value !== 'object' || parsed.value === null) return undefined;
  const { jti, exp } = parsed.value as { jti?: unknown; exp?: unknown };
  if (typeof jti !== 'string' || jti.length === 0 || jti.length > 512) return undefined;
  if (typeof exp !== 'number' || !Number.isFinite(exp)) return undefined;
  return { id: jti, expiresAt: exp * 1000 };
}
