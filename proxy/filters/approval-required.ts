import type { CallToolResult } from '@modelcontextprotocol/server';
import type { CallContext, CallFilter, CallRequest, CallVerdict } from '../gateway/types';
import { qualifyName } from '../names';
import type { EvidenceId, EvidenceStore } from '../policy/evidence-store';
import { callHashOf } from './call-hash';
import { matchNameGlob } from './match-name-glob';

/** One `filters.approval_required` rule: calls to tools matching `tool` need a passkey yes from each of `roles`. */
export interface ApprovalRule {
  /** A glob over qualified names (`pizza__cancel_order`, `github__delete_*`). */
  readonly tool: string;
  readonly roles: readonly string[];
}

/** A gated call as it arrives, with the hash its approvals must be over. */
export interface GatedCall {
  /** The qualified tool name. */
  readonly tool: string;
  readonly arguments: Readonly<Record<string, unknown>>;
  /** base64url SHA-256 of the call's RFC 8785 bytes ({@link callHashOf}). */
  readonly callHash: string;
  /** Every role that must approve it. */
  readonly roles: readonly string[];
}

/** What the approvals on record say about one exact call. */
export type CallApprovalCheck =
  /** A request for this call hash that every role approved: one credential per role. */
  | {
      readonly status: 'approved';
      readonly requestId: string;
      readonly approvals: readonly { readonly role: string; readonly credential: string }[];
    }
  /** Waiting (created now if there was none): the windows the people approve in. */
  | {
      readonly status: 'pending';
      readonly requestId: string;
      readonly waitingFor: readonly string[];
      readonly approveUrls: Readonly<Record<string, string>>;
      readonly expiresAt: string;
    }
  /** No request can be made for it (too many waiting, an unknown role): why, in words. */
  | { readonly status: 'refused'; readonly reason: string };

/** Where one approval request stands, as the filter reads it while a person decides. */
export type CallRequestStatus =
  | { readonly status: 'pending' | 'approved' | 'used'; readonly callHash: string }
  | { readonly status: 'declined' | 'expired'; readonly callHash: string; readonly reason: string };

/** The verdict on one approval: its single-use id and lifetime from the verified bytes, or why not. */
export type CallApprovalProof =
  | { readonly verified: true; readonly id: string; readonly expiresAt: number }
  | { readonly verified: false; readonly reason: string };

/**
 * Where the filter finds approvals by reference (the model never carries them), injected by the
 * host the way `family-spend` fetches its evidence: the household implements it over its store.
 */
export interface CallApprovalGate {
  /** The approvals on record for exactly this call hash, or the pending request for it. */
  check(call: GatedCall): Promise<CallApprovalCheck>;
  /** Verifies one approval field by field against the call as it arrives. */
  verify(call: GatedCall, approval: { readonly role: string; readonly credential: string }): Promise<CallApprovalProof>;
  /** Marks a request's approvals used once they authorised the call (for the windows; the ledger is what binds). */
  markUsed(requestId: string): Promise<void>;
  /**
   * Waits at most `timeoutMs` for the request to be decided (a long-poll ending early when a window
   * decides it), then says where it stands; `undefined` for an unknown request. Reads only.
   */
  wait(
    requestId: string,
    options: { readonly timeoutMs: number; readonly signal?: AbortSignal },
  ): Promise<CallRequestStatus | undefined>;
}

/** One `approval_required` decision, for the audit chain. */
export interface ApprovalDecisionRecord {
  readonly tool: string;
  readonly callHash?: string;
  readonly principal: string;
  readonly decision: 'allow' | 'deny' | 'ask';
  /** The approval request, and on allow the credential ids spent. */
  readonly requestId?: string;
  readonly approvalIds?: readonly string[];
  readonly reason?: string;
}

/** Options for {@link approvalRequired}. */
export interface ApprovalRequiredOptions {
  readonly rules: readonly ApprovalRule[];
  /** Absent: no approvals can be found here, so every matching call is refused (fail closed). */
  readonly gate?: CallApprovalGate;
  /** The single-use evidence ledger each approval is spent in before the call is forwarded. */
  readonly store?: EvidenceStore;
  /** Milliseconds since the epoch. */
  readonly now?: () => number;
  /**
   * Receives every decision. An allow waits for it (the row committed to the audit chain); a throw
   * or rejection on an allow (the chain could not take it) refuses the call and spends nothing. On
   * a refusal it is not waited for, and a failure is ignored.
   */
  readonly onDecision?: (record: ApprovalDecisionRecord) => unknown;
  /** Receives gate and store faults for logs. */
  readonly onError?: (error: unknown) => void;
}

/** The `structuredContent` key of a refusal that needs a person's approval. */
export const approvalRequiredKey = 'approvalRequired';

/**
 * `filters.approval_required` (SPEC §8, docs/human-authority.md): a call to a matching tool is
 * forwarded only when every named role's `CallApproval` over the hash of exactly this call (tool,
 * canonical arguments) verifies, and only once: the approvals are spent in the single-use ledger
 * before the call goes on. Without them the call is refused with a structured result naming the
 * approval request and its windows. Every fault refuses.
 */
export function approvalRequired(options: ApprovalRequiredOptions): CallFilter {
  const now = options.now ?? Date.now;
  const rules = options.rules.map((rule) => ({ matches: matchNameGlob([rule.tool]), roles: rule.roles }));
  const record = (entry: ApprovalDecisionRecord) => {
    try {
      Promise.resolve(options.onDecision?.(entry)).catch(() => undefined);
    } catch {
      // A logging hook must never change a decision.
    }
  };

  return async function approvalRequired(request: CallRequest, context: CallContext): Promise<CallVerdict> {
    // 1. Which rules govern this call, by its qualified name (never the caller's spelling).
    const tool =
      request.server !== undefined && request.toolName !== undefined
        ? qualifyName(request.server.name, request.toolName)
        : request.tool;
    const roles = [...new Set(rules.filter((rule) => rule.matches(tool)).flatMap((rule) => rule.roles))];
    if (roles.length === 0) return { decision: 'allow' };
    const principal = context.principal.id;
    const deny = (reason: string, extra: Partial<ApprovalDecisionRecord> = {}): CallVerdict => {
      record({ tool, principal, decision: 'deny', reason, ...extra });
      return { decision: 'deny', reason };
    };
    // The person declined, or nobody decided in time: the reason, in words and structured.
    const ended = (requestId: string, outcome: Ended): CallVerdict => {
      const reason = `Refused: ${outcome.reason}. Nothing was sent.`;
      record({ tool, principal, decision: 'deny', reason, callHash: outcome.callHash, requestId });
      const detail = { requestId, status: outcome.status, reason: outcome.reason };
      return { decision: 'deny', reason, result: refusalResult(reason, detail, request.hasOutputSchema) };
    };
    const { gate, store } = options;
    if (gate === undefined || store === undefined)
      return deny(`${tool} needs a person's approval, and no approvals can be given here, so the call is refused.`);
    // 2. The hash of the call as it arrives: what every approval must be over.
    let callHash: string;
    try {
      callHash = callHashOf({ tool, arguments: request.arguments });
    } catch {
      return deny(`${tool} needs approval over its exact arguments, and these cannot be put in canonical form.`);
    }
    const call: GatedCall = { tool, arguments: request.arguments, callHash, roles };
    // 3. The retry of a URL ask about a request for this call that was decided since: how it ended
    //    (asking afresh would hide the decline). The state only names the request; the store says.
    const retried = context.retryOf?.startsWith(askPrefix) ? context.retryOf.slice(askPrefix.length) : undefined;
    if (retried !== undefined) {
      const before = await readStatus(gate, retried, 0, context.signal).catch((error: unknown) => {
        options.onError?.(error);
        return undefined;
      });
      if (before?.callHash === callHash && (before.status === 'declined' || before.status === 'expired'))
        return ended(retried, before);
    }
    // 4. The approvals on record for exactly this call, found by reference.
    let check: CallApprovalCheck;
    try {
      check = await gate.check(call);
    } catch (error) {
      options.onError?.(error);
      return deny(`${tool} needs approval, and the approvals could not be read, so the call is refused.`, { callHash });
    }
    if (check.status === 'refused') return deny(`${tool} needs approval: ${check.reason}`, { callHash });
    if (check.status === 'pending') {
      const reason = approvalNeededText(tool, check);
      record({ tool, principal, decision: 'ask', callHash, requestId: check.requestId, reason });
      // A client that can open URLs is sent to the windows and waits the protocol's way (the input
      // primitive's URL ask); any other gets the refusal naming them, and calls again.
      const asked = await askInWindows(gate, check, { tool, callHash, context });
      if (asked.status === 'ended') return ended(check.requestId, asked.outcome);
      if (asked.status === 'refused') return deny(asked.reason, { callHash, requestId: check.requestId });
      if (asked.status !== 'approved')
        return { decision: 'deny', reason, result: approvalNeededResult(reason, check, request.hasOutputSchema) };
      try {
        check = await gate.check(call);
      } catch (error) {
        options.onError?.(error);
        return deny(`${tool} needs approval, and the approvals could not be read, so the call is refused.`, {
          callHash,
        });
      }
      if (check.status !== 'approved')
        return deny(`${tool} needs approval, and request ${asked.requestId} is no longer approved; call again.`, {
          callHash,
          requestId: asked.requestId,
        });
    }
    // 5. One approval per role, each verified field by field against this call.
    const ids: EvidenceId[] = [];
    for (const role of roles) {
      const approval = check.approvals.find((entry) => entry.role === role);
      if (approval === undefined)
        return deny(`${tool} needs the ${role}'s approval, and request ${check.requestId} has none.`, {
          callHash,
          requestId: check.requestId,
        });
      let proof: CallApprovalProof;
      try {
        proof = await gate.verify(call, approval);
      } catch (error) {
        options.onError?.(error);
        proof = { verified: false, reason: 'it could not be verified' };
      }
      if (!proof.verified)
        return deny(`Refused: ${proof.reason}. Ask for approval of exactly this call.`, {
          callHash,
          requestId: check.requestId,
        });
      ids.push({ id: proof.id, expiresAt: proof.expiresAt });
    }
    // 6. Spent once, before the call is forwarded: a second use of the same approval is refused.
    let reservation: string;
    try {
      const reserved = await store.reserve(ids, now());
      if (!reserved.ok) {
        const reason =
          reserved.reason === 'full'
            ? 'Too much unexpired evidence is being tracked right now; the call is refused. Try again later.'
            : 'Refused: this approval has already been used. An approval authorises its call once; ask for a new one.';
        return deny(reason, { callHash, requestId: check.requestId });
      }
      reservation = reserved.reservation;
    } catch (error) {
      options.onError?.(error);
      return deny('The single-use evidence store is unavailable, so the call is refused.', { callHash });
    }
    // 7. The allow is on the audit chain before anything is spent or sent: unrecorded, it is refused.
    try {
      await options.onDecision?.({
        tool,
        principal,
        decision: 'allow',
        callHash,
        requestId: check.requestId,
        approvalIds: ids.map((id) => id.id),
      });
      await store.commit(reservation);
    } catch (error) {
      options.onError?.(error);
      await store.release(reservation).catch((releaseError: unknown) => options.onError?.(releaseError));
      return deny('The approval could not be recorded as spent, so the call is refused.', {
        callHash,
        requestId: check.requestId,
      });
    }
    try {
      await gate.markUsed(check.requestId);
    } catch (error) {
      // Spent in the ledger already: the window only shows it as still approved.
      options.onError?.(error);
    }
    return { decision: 'allow' };
  };
}

/** The URL ask's `id` prefix: `call-approval/<request id>`, what a retry's request state names. */
const askPrefix = 'call-approval/';

/** How the person's decision in the windows ended, as far as the call is concerned. */
type WindowsAnswer =
  | { readonly status: 'approved'; readonly requestId: string }
  | { readonly status: 'not-asked' }
  | { readonly status: 'ended'; readonly outcome: Ended }
  | { readonly status: 'refused'; readonly reason: string };

/** A request that ended without approval. */
type Ended = Extract<CallRequestStatus, { status: 'declined' | 'expired' }>;

/**
 * Sends the person to the approval windows through the input primitive's URL ask (SPEC §3.12):
 * a 2026-07-28 client gets `input_required` (the ask throws {@link InputRequired} past this
 * filter), a 2025-11-25 client's call stays open until a window decides. `not-asked` when the
 * client cannot open URLs, or would not: the caller refuses with the windows' URLs.
 */
async function askInWindows(
  gate: CallApprovalGate,
  check: Extract<CallApprovalCheck, { status: 'pending' }>,
  ask: { readonly tool: string; readonly callHash: string; readonly context: CallContext },
): Promise<WindowsAnswer> {
  const { context, tool } = ask;
  if (context.elicit === undefined) return { status: 'not-asked' };
  const { requestId } = check;
  const answer = await context.elicit({
    mode: 'url',
    id: `${askPrefix}${requestId}`,
    pages: Object.fromEntries(
      check.waitingFor.map((role) => [
        role,
        {
          message: `The ${role} approves or declines exactly this call of ${tool} with their passkey, in their approval window.`,
          url: check.approveUrls[role] ?? '',
        },
      ]),
    ),
    // Reads the request only: a long-poll that ends early when a window decides it.
    settled: async ({ timeoutMs, signal }) =>
      (await readStatus(gate, requestId, timeoutMs, signal))?.status !== 'pending',
  });
  if (answer.action !== 'accept') return { status: 'not-asked' };
  const decided = await readStatus(gate, requestId, 0, context.signal);
  // Bound to this call: a request for another hash never answers for it.
  if (decided === undefined || decided.callHash !== ask.callHash)
    return {
      status: 'refused',
      reason: `Refused: approval request ${requestId} is not for this call. Nothing was sent.`,
    };
  if (decided.status === 'declined' || decided.status === 'expired') return { status: 'ended', outcome: decided };
  if (decided.status === 'pending') return { status: 'not-asked' };
  return { status: 'approved', requestId };
}

function readStatus(
  gate: CallApprovalGate,
  requestId: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<CallRequestStatus | undefined> {
  return gate.wait(requestId, { timeoutMs, ...(signal !== undefined && { signal }) });
}

function approvalNeededText(tool: string, check: Extract<CallApprovalCheck, { status: 'pending' }>): string {
  const windows = check.waitingFor.map((role) => `the ${role} (${check.approveUrls[role] ?? 'approval window'})`);
  return (
    `approval_required: ${tool} runs only after ${windows.join(' and ')} approves exactly this call ` +
    `with a passkey (request ${check.requestId}, until ${check.expiresAt}). Nothing was sent. ` +
    'Once approved, make the same call again with the same arguments.'
  );
}

/** The structured refusal: the request, who must approve and where, for a client or the app's loop to wait on. */
function approvalNeededResult(
  reason: string,
  check: Extract<CallApprovalCheck, { status: 'pending' }>,
  hasOutputSchema: boolean,
): CallToolResult {
  const detail = {
    requestId: check.requestId,
    waitingFor: check.waitingFor,
    approveUrls: check.approveUrls,
    expiresAt: check.expiresAt,
  };
  return refusalResult(reason, { [approvalRequiredKey]: detail }, hasOutputSchema);
}

function refusalResult(reason: string, structured: Record<string, unknown>, hasOutputSchema: boolean): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: reason }],
    // A tool with an output schema gets text only: its structured content must match that schema.
    ...(hasOutputSchema ? {} : { structuredContent: structured }),
  };
}
