import { createHash } from 'node:crypto';
import { CallToolResultSchema } from '@modelcontextprotocol/core';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { ProxyError } from '../errors';
import type { CallContext, CallFilter, CallRequest, CallVerdict, Dispatch, DispatchOutcome } from '../gateway/types';
import { qualifyName } from '../names';
import { DEFAULT_EVIDENCE_LEASE_MS, type EvidenceId, type EvidenceStore, type HeldEvidence } from './evidence-store';
import { safeJsonParse } from './safe-json';

/**
 * When single-use evidence is spent. `on-allow`: as soon as the policy allows (any governed
 * call). `on-success`: only when the dispatched call succeeds (a payment, SPEC §4.7): released on
 * a failure the downstream reports, left in doubt when the outcome is unknown.
 */
export type SpendMode = 'on-allow' | 'on-success';

/**
 * Asks the host how an in-doubt call really ended (the payments side re-asks its rail by the
 * idempotency key and issues the receipt). Answer `failed` only when the call certainly did not
 * and will not take effect: the evidence is then released and the retry dispatched afresh.
 */
export type ResolveInDoubt = (
  request: CallRequest,
  context: CallContext,
  evidence: readonly EvidenceId[],
) => Promise<DispatchOutcome>;

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
  /** When the evidence is spent; default `on-allow`. */
  readonly spend?: SpendMode;
  /** `on-success` only: how a retry learns the outcome of an in-doubt call. Without it, a retry is told to wait. */
  readonly resolveInDoubt?: ResolveInDoubt;
  /** `on-success` only: the largest serialised result kept for replay, in bytes (default {@link DEFAULT_MAX_RESULT_BYTES}). */
  readonly maxResultBytes?: number;
  /**
   * `on-success` only: the sender's lease on a call it is sending, in milliseconds (default
   * {@link DEFAULT_EVIDENCE_LEASE_MS}). It must outlast the dispatch (the payment rail's timeout
   * and more): while it runs, a retry elsewhere never frees the evidence on a failure it reads.
   */
  readonly sendingLeaseMs?: number;
}

/**
 * 24 hours plus 60 s of clock skew: the longest-lived single-use evidence SPEC §5.2 issues
 * (`PaymentReceipt`, `FulfilmentCommitment`); invoices and approvals live minutes.
 */
export const DEFAULT_MAX_EVIDENCE_LIFETIME_MS = 24 * 60 * 60 * 1000 + 60 * 1000;

/** 64 KiB: far more than a receipt; a bigger result is spent all the same but replayed as a short notice. */
export const DEFAULT_MAX_RESULT_BYTES = 64 * 1024;

/**
 * The denial a retry gets while its first call's outcome is unknown (SPEC §4.7
 * `payment_in_progress`). Hosts and tests recognise it by its `payment_in_progress:` prefix.
 */
export const PAYMENT_IN_PROGRESS_REASON =
  'payment_in_progress: This payment is still being confirmed with the payment rail; do not pay again. Ask again in a moment.';

const alreadyUsedReason =
  'This evidence has already been used. Signed evidence authorises one action; obtain fresh approval.';
const reusedReason =
  'This evidence has already been used for a different call. Signed evidence authorises one action, with the arguments it was first used with; obtain fresh approval.';
const replayReason =
  'This evidence already authorised this exact call; its first result is returned again and nothing was sent.';
const storeUnavailableReason = 'The single-use evidence store is unavailable, so the call is refused.';
const fullReason = 'Too much unexpired evidence is being tracked right now; the call is refused. Try again later.';
/** How often one call re-reads the store after a settlement race (a concurrent commit or release) before it tells the caller to wait. */
const maxSettlementRounds = 3;

/**
 * Single-use evidence (SPEC §4.7): keys on the `jti` inside each signed payload. An id already
 * held denies without consulting the policy; ids are reserved atomically before the inner filter
 * runs and released if it denies or throws — a refused call spends nothing. With `spend:
 * 'on-allow'` an allow commits at once; with `spend: 'on-success'` single-use wraps dispatch:
 * in doubt before the call is sent, spent (with its result) on success, released on a reported
 * failure, left in doubt otherwise; a retry of the same call gets the first result or
 * {@link PAYMENT_IN_PROGRESS_REASON}, and reuse for other arguments is denied.
 */
export function singleUseFilter(options: SingleUseFilterOptions): CallFilter {
  const now = options.now ?? Date.now;
  const maxLifetimeMs = options.maxLifetimeMs ?? DEFAULT_MAX_EVIDENCE_LIFETIME_MS;
  const spend = options.spend ?? 'on-allow';
  if (
    spend === 'on-allow' &&
    (options.resolveInDoubt || options.maxResultBytes !== undefined || options.sendingLeaseMs !== undefined)
  ) {
    throw new ProxyError(
      'config-invalid',
      'resolveInDoubt, maxResultBytes and sendingLeaseMs apply only to spend: "on-success".',
    );
  }
  const settlement = spend === 'on-success' ? onSuccessSettlement(options, now) : undefined;

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
    if (settlement) return settlement(request, context, ids);
    // 2. Atomic check-and-hold.
    let reserved: Awaited<ReturnType<EvidenceStore['reserve']>>;
    try {
      reserved = await options.store.reserve(ids, now());
    } catch (error) {
      options.onError?.(error);
      return { decision: 'deny', reason: storeUnavailableReason };
    }
    if (!reserved.ok) return { decision: 'deny', reason: reserved.reason === 'full' ? fullReason : alreadyUsedReason };
    // 3. The policy decides; commit on allow, release otherwise (including a throwing inner filter).
    const verdict = await decideReleasingOnDeny(options, request, context, reserved.reservation);
    if (verdict.decision !== 'allow') return verdict;
    try {
      await options.store.commit(reserved.reservation);
    } catch (error) {
      options.onError?.(error);
      return { decision: 'deny', reason: 'The evidence could not be recorded as spent, so the call is refused.' };
    }
    return verdict;
  };
}

/** Runs the inner filter on a held reservation, releasing it when the filter denies or throws. */
async function decideReleasingOnDeny(
  options: SingleUseFilterOptions,
  request: CallRequest,
  context: CallContext,
  reservation: string,
): Promise<CallVerdict> {
  const release = () =>
    options.store.release(reservation).catch((releaseError: unknown) => options.onError?.(releaseError));
  let verdict: CallVerdict;
  try {
    verdict = await options.inner(request, context);
  } catch (error) {
    await release();
    throw error;
  }
  if (verdict.decision !== 'allow') await release();
  return verdict;
}

/** What a look at the held entries decided: a verdict for the caller, or read the store again. */
type HeldDecision = { readonly kind: 'verdict'; readonly verdict: CallVerdict } | { readonly kind: 'again' };

/**
 * The `on-success` flow (SPEC §4.7, single-use through settlement): reserve → policy → in doubt →
 * dispatch → spent | released | in doubt, and the answer to a call whose evidence is already held.
 */
function onSuccessSettlement(options: SingleUseFilterOptions, now: () => number) {
  const { store } = options;
  const maxResultBytes = options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
  const sendingLeaseMs = options.sendingLeaseMs ?? DEFAULT_EVIDENCE_LEASE_MS;
  /**
   * Reservations whose call this process is running right now: never resolved from under it, even
   * past the sender's lease. Other processes see the lease in the store instead.
   */
  const running = new Set<string>();
  const logged = (error: unknown) => options.onError?.(error);
  const verdict = (value: CallVerdict): HeldDecision => ({ kind: 'verdict', verdict: value });
  const inProgress: CallVerdict = { decision: 'deny', reason: PAYMENT_IN_PROGRESS_REASON };

  /** Records how the dispatched call ended; a store fault leaves the entry in doubt (never reusable). */
  async function settle(reservation: string, ids: readonly EvidenceId[], outcome: DispatchOutcome): Promise<void> {
    try {
      if (outcome.status === 'completed' && outcome.result.isError !== true) {
        // Succeeded: spent for good, with the result a retry is shown.
        await commitOwn(reservation, ids, serialiseResult(outcome.result, maxResultBytes));
      } else if (outcome.status === 'failed' || outcome.status === 'completed') {
        // The downstream reported a failure (a decline, a 4xx, an error result): nothing was
        // spent, so the approval may be retried.
        await store.release(reservation);
      } else {
        // Unknown (timeout, lost connection): it may have run, so it stays in doubt, and with the
        // sender's lease ended a retry may settle it from the rail at once.
        await store.markInDoubt(reservation);
      }
    } catch (error) {
      logged(error);
    }
  }

  /**
   * Commits the sender's own reservation. A retry on another instance that read the same success
   * while this one was still sending may have committed it first: that is the same end, not a fault.
   */
  async function commitOwn(reservation: string, ids: readonly EvidenceId[], result: string): Promise<void> {
    try {
      await store.commit(reservation, { result });
    } catch (error) {
      const held = await store.lookup(
        ids.map((evidence) => evidence.id),
        now(),
      );
      const spentHere =
        held.length === ids.length &&
        held.every((entry) => entry.reservation === reservation && entry.state === 'spent');
      if (!spentHere) throw error;
    }
  }

  /** The policy on a fresh reservation; on allow, dispatch wrapped by the settlement steps. */
  async function decideAndWrap(
    request: CallRequest,
    context: CallContext,
    held: { readonly reservation: string; readonly ids: readonly EvidenceId[] },
  ): Promise<CallVerdict> {
    const { reservation, ids } = held;
    const decided = await decideReleasingOnDeny(options, request, context, reservation);
    if (decided.decision !== 'allow') return decided;
    const innerWrap = decided.wrap;
    const wrap = async (dispatch: Dispatch): Promise<DispatchOutcome> => {
      // 1. In doubt before anything is sent, durably: a crash from here on never frees the
      //    evidence. The sender's lease tells every instance that the call is on its way.
      try {
        await store.markInDoubt(reservation, { sendingUntil: now() + sendingLeaseMs });
      } catch (error) {
        logged(error);
        await store.release(reservation).catch(logged);
        return { status: 'failed', reason: 'The evidence could not be held for this call, so it was not sent.' };
      }
      running.add(reservation);
      try {
        // 2. Dispatch (through the inner filter's own wrap, if it has one), then settle by the outcome.
        const outcome = innerWrap ? await innerWrap(dispatch) : await dispatch();
        await settle(reservation, ids, outcome);
        return outcome;
      } finally {
        running.delete(reservation);
      }
    };
    return { decision: 'allow', ...(decided.request && { request: decided.request }), wrap };
  }

  /** A call whose evidence is already held: replay, wait, resolve or refuse. */
  async function answerHeld(
    held: readonly HeldEvidence[],
    fingerprint: string,
    call: { request: CallRequest; context: CallContext; ids: readonly EvidenceId[] },
  ): Promise<HeldDecision> {
    // 1. Held for a different call (other arguments, other evidence, or spent on allow): refused.
    const reservations = new Set(held.map((entry) => entry.reservation));
    const [reservation] = reservations;
    if (
      held.length === 0 ||
      reservations.size !== 1 ||
      reservation === undefined ||
      held.some((entry) => entry.fingerprint !== fingerprint)
    ) {
      return verdict({ decision: 'deny', reason: held.length === 0 ? alreadyUsedReason : reusedReason });
    }
    // 2. Spent by this very call: the first result again, nothing sent.
    const spent = held.find((entry) => entry.state === 'spent');
    if (spent) {
      const result = spent.result === undefined ? undefined : parseStoredResult(spent.result);
      return verdict(
        result ? { decision: 'deny', reason: replayReason, result } : { decision: 'deny', reason: alreadyUsedReason },
      );
    }
    // 3. Still deciding, or being sent by this process right now: wait.
    if (held.some((entry) => entry.state === 'reserved') || running.has(reservation) || !options.resolveInDoubt) {
      return verdict(inProgress);
    }
    // 4. In doubt: the host asks the rail how it ended. While the sender's lease runs, the call may
    //    still be on its way (from another instance): a success settles it, but a failure read now
    //    may only mean the sender has not got that far, so the entry is not freed from under it.
    const sending = held.some((entry) => entry.sendingUntil !== undefined && entry.sendingUntil > now());
    let outcome: DispatchOutcome;
    try {
      outcome = await options.resolveInDoubt(call.request, call.context, call.ids);
    } catch (error) {
      logged(error);
      return verdict(inProgress);
    }
    if (outcome.status === 'unknown') return verdict(inProgress);
    try {
      if (outcome.status === 'completed' && outcome.result.isError !== true) {
        await store.commit(reservation, { result: serialiseResult(outcome.result, maxResultBytes) });
        return verdict({ decision: 'deny', reason: replayReason, result: outcome.result });
      }
      if (sending) return verdict(inProgress);
      // It certainly failed: free the evidence and treat this call as a fresh attempt.
      await store.release(reservation);
    } catch (error) {
      // A concurrent retry settled it first: read the store again.
      logged(error);
    }
    return { kind: 'again' };
  }

  return async function settleOnSuccess(
    request: CallRequest,
    context: CallContext,
    ids: readonly EvidenceId[],
  ): Promise<CallVerdict> {
    const fingerprint = callFingerprint(request, ids);
    for (let round = 0; round < maxSettlementRounds; round++) {
      let reserved: Awaited<ReturnType<EvidenceStore['reserve']>>;
      try {
        reserved = await store.reserve(ids, now(), { fingerprint });
      } catch (error) {
        logged(error);
        return { decision: 'deny', reason: storeUnavailableReason };
      }
      if (reserved.ok) return decideAndWrap(request, context, { reservation: reserved.reservation, ids });
      if (reserved.reason === 'full') return { decision: 'deny', reason: fullReason };
      const decided = await answerHeld(reserved.held, fingerprint, { request, context, ids });
      if (decided.kind === 'verdict') return decided.verdict;
    }
    return inProgress;
  };
}

/**
 * SHA-256 over the canonical JSON of what makes a call "the same call": the tool's qualified name,
 * its arguments without the credential fields (a fresh copy of a credential is the same call) and
 * the evidence ids it spends.
 */
function callFingerprint(request: CallRequest, ids: readonly EvidenceId[]): string {
  const tool =
    request.server !== undefined && request.toolName !== undefined
      ? qualifyName(request.server.name, request.toolName)
      : request.tool;
  const credentials = new Set(request.credentialFields);
  const args = Object.fromEntries(Object.entries(request.arguments).filter(([key]) => !credentials.has(key)));
  const canonical = canonicalJson({ tool, arguments: args, evidence: ids.map((evidence) => evidence.id) });
  return createHash('sha256').update(canonical).digest('hex');
}

/** JSON with object keys sorted at every depth, so equal values always hash alike. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item ?? null)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const members = Object.keys(record)
      .sort()
      .flatMap((key) => (record[key] === undefined ? [] : [`${JSON.stringify(key)}:${canonicalJson(record[key])}`]));
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The result as kept for replay; one too large to keep becomes a short notice (the call is spent all the same). */
function serialiseResult(result: CallToolResult, maxBytes: number): string {
  const text = JSON.stringify(result);
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  const notice: CallToolResult = {
    content: [
      {
        type: 'text',
        text: 'This call already completed with this evidence; its result was too large to keep, so it cannot be shown again.',
      },
    ],
  };
  return JSON.stringify(notice);
}

/** A stored result, read back through the safe JSON helper and the SDK's schema; undefined when unreadable. */
function parseStoredResult(text: string): CallToolResult | undefined {
  const parsed = safeJsonParse(text);
  if (!parsed.ok) return undefined;
  const checked = CallToolResultSchema.safeParse(parsed.value);
  return checked.success ? (checked.data as CallToolResult) : undefined;
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
