import { randomUUID } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { CallApprovalCheck, CallApprovalGate, CallApprovalProof, GatedCall } from '../proxy/index';
import { callHashOf, canonicalCall } from '../proxy/index';
import type { CallApprovalRecord, CallApprovalStatus, CallApprovalStore } from './call-approval-store';
import type { PasskeyAssertion } from './credentials';
import { createDecisionWakes } from './decision-wakes';
import type { IdentityEvent, IdentityEventSink } from './events';
import type { Household } from './household';
import { IdentityError } from './identity-error';
import { decodeSegment, isRecord, parseJsonObject } from './safe-json';
import { type Role, roles } from './store';
import { verifyCallApproval } from './verify-call-approval';
import { createCredentialVerifier, householdKeys } from './verify-credential';
import { verifyAssertionFast } from './verify-passkey-assertion';

/**
 * How long a call waits for its approvals: a person nearby answers in minutes. As long as an
 * invoice lives, and shorter than a patient v2 SDK client's rounds (10 retries of a URL ask, each
 * waiting `urlWaitMs` at the server: 7.5 minutes), so such a client's retry is told the request
 * expired instead of giving up first with the SDK's own error.
 */
export const callApprovalLifetimeMs = 5 * 60 * 1000;
/** Most call-approval requests waiting at once: an agent looping over arguments cannot flood the windows. */
export const maxPendingCallApprovals = 20;

/** Options of {@link createCallApprovals}. */
export interface CallApprovalsOptions {
  readonly household: Household;
  readonly store: CallApprovalStore;
  /** Origin of the approval windows and of passkey assertions. */
  readonly origin: string;
  readonly rpId: string;
  readonly clock?: () => Date;
  /**
   * How often a waiter re-reads the store for a decision taken in another process; default 1 s.
   * The fallback: a store with a `watch` (PostgreSQL) wakes the waiter as the decision commits.
   */
  readonly pollIntervalMs?: number;
  /** What a gated tool does, in the window's words ("cancel an order", at "Main Street Pizza"); else its name. */
  readonly describe?: (tool: string) => Promise<CallDescription | undefined>;
  /** Receives each request's life (requested, approved, declined, expired, spent) for the audit chain. */
  readonly events?: IdentityEventSink;
}

/** A gated tool in words: the action, and where (the merchant or server), for the window's sentence. */
export interface CallDescription {
  readonly action: string;
  readonly at?: string;
}

/** One argument as the window shows it: its name and its value as canonical JSON text. */
export interface CallArgumentView {
  readonly name: string;
  /** A string argument as the string itself; any other value as its RFC 8785 JSON. */
  readonly value: string;
}

/** A call-approval request as a window shows it, rendered from the same canonical bytes the hash covers. */
export interface CallApprovalView {
  readonly requestId: string;
  readonly status: CallApprovalStatus;
  readonly tool: string;
  /** What the call does, in words; the tool's name when the household has none for it. */
  readonly action: string;
  readonly at?: string;
  readonly arguments: readonly CallArgumentView[];
  readonly callHash: string;
  readonly requiredRoles: readonly Role[];
  readonly approvedRoles: readonly Role[];
  readonly expiresAt: string;
  readonly reason?: string;
}

/** The outcome of a member's decision. */
export type CallDecisionOutcome =
  | { readonly ok: true; readonly record: CallApprovalRecord }
  | { readonly ok: false; readonly reason: string };

/** Where a request stands for a waiter: decided, or still waiting when the wait ran out. */
export type CallWaitOutcome =
  | { readonly status: 'approved' | 'used'; readonly requestId: string }
  | { readonly status: 'pending'; readonly requestId: string; readonly waitingFor: readonly Role[] }
  | { readonly status: 'declined' | 'expired'; readonly requestId: string; readonly reason: string };

/** Durable requests for a person's passkey yes to one exact gated call, and the gate the proxy filter asks. */
export interface CallApprovals {
  /** The `approval_required` filter's lookup by call hash, and its verifier. */
  readonly gate: CallApprovalGate;
  get(requestId: string): Promise<CallApprovalView | undefined>;
  /** Requests a role may decide now. */
  pendingFor(role: Role): Promise<readonly CallApprovalView[]>;
  /** Issues the member's `CallApproval` over a passkey assertion, after verifying it with the enrolled key. */
  approve(input: {
    readonly requestId: string;
    readonly role: Role;
    readonly assertion: PasskeyAssertion;
  }): Promise<CallDecisionOutcome>;
  decline(input: { readonly requestId: string; readonly role: Role }): Promise<CallDecisionOutcome>;
  /** Long-polls until the request is decided or `timeoutMs` passes. */
  wait(input: {
    readonly requestId: string;
    readonly timeoutMs: number;
    readonly signal?: AbortSignal;
  }): Promise<CallWaitOutcome>;
}

/**
 * Call approvals over their own store (docs/human-authority.md "`approval_required`"). The gate
 * finds the request for exactly a call's hash, creating a pending one when there is none; a
 * member approves it with a passkey assertion whose challenge is that hash, wrapped in a
 * `CallApproval` the member signs; the filter verifies it field by field and spends it once.
 */
export function createCallApprovals(options: CallApprovalsOptions): CallApprovals {
  const { household, store } = options;
  const clock = options.clock ?? (() => new Date());
  const emit = (event: IdentityEvent) => {
    try {
      options.events?.(event);
    } catch {
      // The live log never changes a decision.
    }
  };
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  const verifyCredential = createCredentialVerifier(householdKeys(household));
  const context = () => ({
    adminDid: household.adminDid,
    webauthn: { rpId: options.rpId, origin: options.origin },
    now: clock(),
    verifyCredential,
    verifyAssertion: verifyAssertionFast,
  });
  // A local decision wakes its waiters at once; another instance's, through the store's watch.
  const wakes = createDecisionWakes(store.watch?.bind(store));
  const notify = (requestId: string) => wakes.notify(requestId);
  const approveUrl = (role: Role, requestId: string) =>
    `${options.origin}/approve?as=${role}&request=${encodeURIComponent(requestId)}`;

  /** Expires a pending request past its time; returns the current record. */
  async function current(requestId: string): Promise<CallApprovalRecord | undefined> {
    const record = await store.get(requestId);
    const now = clock().getTime();
    if (record?.status !== 'pending' || now < record.expiresAt) return record;
    const reason = 'nobody approved the call in time; the agent may ask again';
    if (await store.transition(requestId, { from: ['pending'], to: 'expired', now, reason })) {
      emit({ kind: 'call-approval-expired', requestId, tool: record.tool });
      notify(requestId);
    }
    return store.get(requestId);
  }

  const pendingCheck = (record: CallApprovalRecord): CallApprovalCheck => {
    const waitingFor = record.requiredRoles.filter((role) => record.approvals[role] === undefined);
    return {
      status: 'pending',
      requestId: record.requestId,
      waitingFor,
      approveUrls: Object.fromEntries(waitingFor.map((role) => [role, approveUrl(role, record.requestId)])),
      expiresAt: new Date(record.expiresAt).toISOString(),
    };
  };

  /** Long-polls until the request is decided or `timeoutMs` passes. */
  async function wait({
    requestId,
    timeoutMs,
    signal,
  }: Parameters<CallApprovals['wait']>[0]): Promise<CallWaitOutcome> {
    const deadline = performance.now() + timeoutMs;
    const wake = wakes.open(requestId, signal);
    try {
      for (;;) {
        const since = wake.count;
        const record = await current(requestId);
        if (!record) throw new IdentityError('not-found', `there is no call-approval request ${requestId}`);
        const left = deadline - performance.now();
        if (record.status !== 'pending' || left <= 0 || signal?.aborted) return waitOutcomeOf(record);
        const untilExpiry = record.expiresAt - clock().getTime();
        await wake.sleep(Math.max(1, Math.min(pollIntervalMs, left, untilExpiry)), since);
      }
    } finally {
      wake.close();
    }
  }

  const gate: CallApprovalGate = {
    async check(call: GatedCall) {
      // 1. Roles the household has; any other name can never approve, so nothing is created.
      const required = call.roles.filter((role): role is Role => (roles as readonly string[]).includes(role));
      if (required.length !== call.roles.length)
        return { status: 'refused', reason: `the household has no ${call.roles.join(', ')} role to approve it` };
      // 2. The open request for exactly this hash, if it is still open now.
      const found = await store.findOpen(call.callHash);
      const open = found === undefined ? undefined : await current(found.requestId);
      // It stands only for the roles it asked: a request for the child never answers for the parent.
      if (
        open !== undefined &&
        open.callHash === call.callHash &&
        required.every((role) => open.requiredRoles.includes(role))
      ) {
        if (open.status === 'approved') {
          return {
            status: 'approved',
            requestId: open.requestId,
            approvals: roles.flatMap((role) => {
              const credential = open.approvals[role];
              return credential === undefined ? [] : [{ role, credential }];
            }),
          };
        }
        if (open.status === 'pending') return pendingCheck(open);
      }
      // 3. A new request, bounded (the store counts and inserts as one step, across instances): the
      // window shows the call from the same canonical bytes the hash covers.
      // The window renders the stored bytes and the passkey signs the stored hash: they must be one.
      const bytes = canonicalCall(call);
      if (callHashOf(call) !== call.callHash)
        return { status: 'refused', reason: 'the call hash is not the hash of the call' };
      const now = clock().getTime();
      const record: CallApprovalRecord = {
        requestId: randomUUID(),
        tool: call.tool,
        call: bytes,
        callHash: call.callHash,
        requiredRoles: required,
        approvals: {},
        status: 'pending',
        createdAt: now,
        expiresAt: now + callApprovalLifetimeMs,
        updatedAt: now,
      };
      const opened = await store.create(record, { maxPending: maxPendingCallApprovals });
      if ('full' in opened)
        return { status: 'refused', reason: 'too many calls are waiting for approval; decide those first' };
      if (opened.created) {
        emit({
          kind: 'call-approval-requested',
          requestId: record.requestId,
          tool: record.tool,
          callHash: record.callHash,
          requiredRoles: record.requiredRoles,
        });
        return pendingCheck(record);
      }
      // Another check, in this instance or another, opened this hash's request first: one request
      // per call, so the caller waits on that one when it asks for these roles, else is refused.
      const other = opened.record;
      if (other.status === 'pending' && required.every((role) => other.requiredRoles.includes(role)))
        return pendingCheck(other);
      return { status: 'refused', reason: 'another request for this call is open; decide it first' };
    },

    async verify(call, approval): Promise<CallApprovalProof> {
      const role = approval.role;
      if (role !== 'child' && role !== 'parent') return { verified: false, reason: `there is no ${role} role` };
      // The enrollment of the passkey the approval carries, read from the household's store.
      const credentialId = passkeyIdOf(approval.credential);
      const passkey = credentialId === undefined ? undefined : await household.store.passkeys.get(credentialId);
      if (passkey === undefined)
        return { verified: false, reason: `the ${role}'s approval carries no enrolled passkey` };
      const verdict = await verifyCallApproval(
        {
          call: { tool: call.tool, arguments: call.arguments },
          approval: approval.credential,
          role,
          membership: household.memberships[role],
          enrollment: passkey.enrollment,
        },
        context(),
      );
      if (!verdict.verified) return verdict;
      return { verified: true, id: verdict.approval.jti, expiresAt: verdict.approval.exp * 1000 };
    },

    async markUsed(requestId) {
      if (await store.transition(requestId, { from: ['approved'], to: 'used', now: clock().getTime() })) {
        const record = await store.get(requestId);
        emit({ kind: 'call-approval-spent', requestId, tool: record?.tool ?? '' });
        notify(requestId);
      }
    },

    async wait(requestId, { timeoutMs, signal }) {
      const record = await store.get(requestId);
      if (record === undefined) return undefined;
      const outcome = await wait({ requestId, timeoutMs, ...(signal !== undefined && { signal }) });
      const { callHash } = record;
      return outcome.status === 'declined' || outcome.status === 'expired'
        ? { status: outcome.status, callHash, reason: outcome.reason }
        : { status: outcome.status, callHash };
    },
  };

  const refuse = (reason: string) => ({ ok: false, reason }) as const;
  const described = async (record: CallApprovalRecord): Promise<CallApprovalView> => {
    const description = await options.describe?.(record.tool);
    return viewOf(record, description);
  };

  return {
    gate,

    async get(requestId) {
      const record = await current(requestId);
      return record && described(record);
    },

    async pendingFor(role) {
      const now = clock().getTime();
      const pending = await store.listPending();
      const mine = pending.filter((record) => record.requiredRoles.includes(role) && record.expiresAt > now);
      return Promise.all(mine.map(described));
    },

    async approve({ requestId, role, assertion }) {
      // 1. A pending, unexpired request that needs this role and that it has not approved yet.
      const record = await current(requestId);
      if (!record) return refuse(`there is no call-approval request ${requestId}`);
      if (record.status !== 'pending') return refuse(`the request is ${record.status}, not pending`);
      if (!record.requiredRoles.includes(role)) return refuse(`the ${role} is not asked to approve this call`);
      if (record.approvals[role] !== undefined) return refuse(`the ${role} has already approved this call`);
      // 2. The passkey is enrolled for this role, and its assertion signs this call's hash.
      const passkey = await household.store.passkeys.get(assertion.credentialId);
      if (passkey?.role !== role) return refuse(`the passkey is not enrolled for the ${role}`);
      const signed = await verifyAssertionFast(assertion, {
        challenge: record.callHash,
        origin: options.origin,
        rpId: options.rpId,
        publicKeyJwk: passkey.publicKeyJwk,
      });
      if (!signed.verified) return refuse(signed.reason);
      // 3. The member signs the CallApproval carrying that assertion.
      const now = clock();
      const approval = await household.issue({
        signer: role,
        type: 'CallApproval',
        subject: household.members[role],
        claims: { role, tool: record.tool, callHash: record.callHash, requestId, passkey: assertion },
        now,
      });
      // 4. What is stored must verify as the filter will read it, against the call the request holds.
      const call = callOf(record);
      const check = await verifyCallApproval(
        { call, approval, role, membership: household.memberships[role], enrollment: passkey.enrollment },
        { ...context(), now },
      );
      if (!check.verified)
        throw new IdentityError('issue-failed', `the issued call approval does not verify: ${check.reason}`);
      // 5. Record it once; the last required approval moves the request to approved.
      if (!(await store.addApproval(requestId, role, approval, now.getTime())))
        return refuse(`the request is no longer waiting for the ${role}`);
      const updated = (await store.get(requestId)) ?? record;
      const complete = updated.requiredRoles.every((required) => updated.approvals[required] !== undefined);
      if (complete) await store.transition(requestId, { from: ['pending'], to: 'approved', now: now.getTime() });
      emit({ kind: 'call-approval-approved', requestId, tool: record.tool, role, complete });
      notify(requestId);
      return { ok: true, record: (await store.get(requestId)) ?? updated };
    },

    async decline({ requestId, role }) {
      const record = await current(requestId);
      if (!record) return refuse(`there is no call-approval request ${requestId}`);
      if (!record.requiredRoles.includes(role)) return refuse(`the ${role} is not asked to approve this call`);
      const reason = `the ${role} declined the call`;
      if (!(await store.transition(requestId, { from: ['pending'], to: 'declined', now: clock().getTime(), reason })))
        return refuse(`the request is ${record.status}, not pending`);
      emit({ kind: 'call-approval-declined', requestId, tool: record.tool, role });
      notify(requestId);
      return { ok: true, record: (await store.get(requestId)) ?? record };
    },

    wait,
  };
}

/** The call a request holds, read back from its canonical bytes. */
function callOf(record: CallApprovalRecord): { tool: string; arguments: Record<string, unknown> } {
  const value = parseJsonObject(record.call);
  if (value === undefined || typeof value.tool !== 'string' || !isRecord(value.arguments)) {
    throw new IdentityError('conflict', `call-approval request ${record.requestId} holds no readable call`);
  }
  return { tool: value.tool, arguments: value.arguments };
}

/**
 * The request as a window shows it: every argument that is hashed, from the stored canonical
 * bytes (the same bytes the hash covers), in their canonical order.
 */
function viewOf(record: CallApprovalRecord, description: CallDescription | undefined): CallApprovalView {
  const call = callOf(record);
  return {
    requestId: record.requestId,
    status: record.status,
    tool: call.tool,
    action: description?.action ?? `run ${call.tool}`,
    ...(description?.at === undefined ? {} : { at: description.at }),
    arguments: Object.entries(call.arguments).map(([name, value]) => ({
      name,
      value: typeof value === 'string' ? value : (canonicalize(value) ?? 'null'),
    })),
    callHash: record.callHash,
    requiredRoles: record.requiredRoles,
    approvedRoles: record.requiredRoles.filter((role) => record.approvals[role] !== undefined),
    expiresAt: new Date(record.expiresAt).toISOString(),
    ...(record.reason === undefined ? {} : { reason: record.reason }),
  };
}

function waitOutcomeOf(record: CallApprovalRecord): CallWaitOutcome {
  const { requestId } = record;
  switch (record.status) {
    case 'pending':
      return {
        status: 'pending',
        requestId,
        waitingFor: record.requiredRoles.filter((role) => record.approvals[role] === undefined),
      };
    case 'declined':
    case 'expired':
      return { status: record.status, requestId, reason: record.reason ?? `the request ${record.status}` };
    default:
      return { status: record.status, requestId };
  }
}

/** The credential id of the passkey assertion a `CallApproval` carries (unverified: it only picks the enrollment). */
function passkeyIdOf(jws: string): string | undefined {
  const claims = decodeSegment(jws.split('.')[1] ?? '') as
    | { vc?: { credentialSubject?: { passkey?: { credentialId?: unknown } } } }
    | undefined;
  const id = claims?.vc?.credentialSubject?.passkey?.credentialId;
  return typeof id === 'string' && id.length > 0 && id.length <= 1024 ? id : undefined;
}
