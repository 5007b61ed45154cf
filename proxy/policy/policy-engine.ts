import { ProxyError, type ProxyErrorCode } from '../errors';

/**
 * What a policy decided. `deny` is an ordinary refusal on the evidence; `error` means the policy
 * could not be evaluated (trap, builtin fault, missing input) — it denies too, but is reported as
 * a fault, never as a normal denial (SPEC §4.1).
 */
export type PolicyOutcome =
  | { readonly decision: 'allow' }
  | { readonly decision: 'deny'; readonly failedChecks: readonly string[]; readonly reasons: readonly string[] }
  | { readonly decision: 'error'; readonly code: ProxyErrorCode; readonly message: string; readonly error: unknown };

/** One loaded policy, evaluated many times. Both engines implement it and share one contract suite. */
export interface PolicyEngine {
  readonly kind: 'rego' | 'cel';
  /** The policy package (`spend_limit`), used in logs and entrypoint names. */
  readonly packageName: string;
  /** Never throws: every fault is an `error` outcome. */
  evaluate(input: unknown): Promise<PolicyOutcome>;
}

/** An engine's raw answer before normalisation: the three documents, or the fault that stopped it. */
export type RawEngineResult =
  | { readonly kind: 'result'; readonly allow: unknown; readonly failedChecks: unknown; readonly denyReason: unknown }
  | { readonly kind: 'fault'; readonly error: unknown };

/**
 * The one normaliser every engine result passes through. Only `allow === true` allows; a fault is an
 * error; anything else — undefined, a string, a number, `"true"` — is a deny (fail closed).
 */
export function normaliseOutcome(raw: RawEngineResult): PolicyOutcome {
  if (raw.kind === 'fault') {
    const error = raw.error;
    if (ProxyError.isInstance(error)) return { decision: 'error', code: error.code, message: error.message, error };
    const message = error instanceof Error ? error.message : typeof error === 'string' ? error : 'unknown engine fault';
    return { decision: 'error', code: 'evaluation-failed', message, error };
  }
  if (raw.allow === true) return { decision: 'allow' };
  return { decision: 'deny', failedChecks: stringList(raw.failedChecks), reasons: stringList(raw.denyReason) };
}

/** Accepts a string, an array or a set-as-array of strings; drops everything else. Sorted for determinism. */
function stringList(value: unknown): readonly string[] {
  if (typeof value === 'string') return value.length > 0 ? [value] : [];
  if (!Array.isArray(value)) return [];
  return value.filter((item): item is string => typeof item === 'string' && item.length > 0).sort();
}
