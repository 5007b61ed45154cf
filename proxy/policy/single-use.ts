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
}

/**
 * Single-use evidence (SPEC §4.7): keys on the `jti` inside each signed payload. An id already
 * spent denies without consulting the policy; ids are reserved atomically before the inner filter
 * runs, committed only if it allows, and released if it denies or throws — a refused call spends nothing.
 */
export function singleUseFilter(options: SingleUseFilterOptions): CallFilter {
  const now = options.now ?? Date.now;
  return async function singleUse(request: CallRequest, context: CallContext): Promise<CallVerdict> {
    // 1. Read each evidence id. The payload is not verified yet: a forged id can only cause a refusal,
    //    and nothing is spent unless the policy (which verifies the signature) allows.
    const ids: EvidenceId[] = [];
    for (const field of options.evidenceFields) {
      const value = Object.hasOwn(request.arguments, field) ? request.arguments[field] : undefined;
      if (value === undefined || value === null) continue;
      const evidence = evidenceIdOf(value);
      if (!evidence)
        return {
          decision: 'deny',
          reason: `\`${field}\` is not single-use evidence (a signed credential with jti and exp).`,
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
