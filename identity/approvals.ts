import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { AllowanceStanding, Allowances } from './allowances';
import type { PasskeyAssertion } from './credentials';
import { createDecisionWakes } from './decision-wakes';
import type { IdentityEventSink } from './events';
import type { Household } from './household';
import { type MemberNames, memberNamesOf } from './household-profile';
import { IdentityError } from './identity-error';
import { decodeSegment } from './safe-json';
import type { ApprovalHandoverCause, ApprovalRecord, Role } from './store';
import { createCredentialVerifier, householdKeys, type VerifiedCredential } from './verify-credential';
import { invoiceHashOf, verifyOrderApproval } from './verify-order-approval';
import { verifyAssertionFast } from './verify-passkey-assertion';

/** Options of {@link createApprovals}. */
export interface ApprovalsOptions {
  readonly household: Household;
  /** Origin of the approval windows (`approveUrls`) and of passkey assertions. */
  readonly origin: string;
  readonly rpId: string;
  /**
   * The parent's standing allowances: an order one covers needs only the child; one at a merchant
   * where the parent set an allowance that does not cover it needs the parent, whatever its total.
   */
  readonly allowances?: Pick<Allowances, 'cover' | 'standing'>;
  readonly events?: IdentityEventSink;
  readonly clock?: () => Date;
  /**
   * How often a waiter re-reads the store for a decision taken in another process; default 1 s.
   * The fallback: a store with a `watch` (PostgreSQL) wakes the waiter as the decision commits.
   */
  readonly pollIntervalMs?: number;
}

/** The signed terms of an invoice, as the approval windows show them (decoded from merchant-signed bytes). */
export interface InvoiceTerms {
  readonly invoiceId: string;
  readonly merchantId: string;
  readonly merchantName: string;
  readonly items: ReadonlyArray<{
    readonly sku: string;
    readonly name: string;
    readonly qty: number;
    readonly unitPriceCents: number;
    readonly listPriceCents: number;
  }>;
  readonly totalCents: number;
  readonly currency: string;
  readonly deliverTo: string;
}

/** One approval request as a window or a tool reports it. */
export interface ApprovalView {
  readonly approvalId: string;
  readonly status: ApprovalRecord['status'];
  readonly terms: InvoiceTerms;
  readonly requiredRoles: readonly Role[];
  readonly approvedRoles: readonly Role[];
  readonly expiresAt: string;
  readonly reason?: string;
  /** The parent's standing allowance that stands in for the parent's approval of this order, if one does. */
  readonly allowance?: AllowanceStanding;
  /** What the household calls its members (set in the parent's window), for the windows' words; not evidence. */
  readonly members: MemberNames;
  /**
   * Set when the order was approved on the parent's allowance alone and the charge found the
   * allowance no longer covers it: why, and when it was handed to the parent.
   */
  readonly handover?: {
    readonly cause: ApprovalHandoverCause;
    readonly period?: 'day' | 'week';
    readonly at: string;
  };
}

/** What `request_approval` answers. */
export type RequestOutcome =
  | {
      readonly ok: true;
      readonly approvalId: string;
      readonly status: ApprovalRecord['status'];
      readonly requiredRoles: readonly Role[];
      readonly approveUrls: Readonly<Partial<Record<Role, string>>>;
      readonly expiresAt: string;
    }
  | { readonly ok: false; readonly reason: string };

/** The evidence an approved request yields for the payment call. */
export interface ApprovalEvidenceSet {
  readonly invoice: string;
  readonly childApproval: string;
  readonly parentApproval?: string;
}

/** What `await_approval` answers. */
export type WaitOutcome =
  | { readonly status: 'approved'; readonly approvalId: string; readonly evidence: ApprovalEvidenceSet }
  | { readonly status: 'pending'; readonly approvalId: string; readonly waitingFor: readonly Role[] }
  | { readonly status: 'declined' | 'expired'; readonly approvalId: string; readonly reason: string };

/** The outcome of a member's decision. */
export type DecisionOutcome =
  | { readonly ok: true; readonly record: ApprovalRecord }
  | { readonly ok: false; readonly reason: string };

/** Durable approval requests (SPEC §5.4). */
export interface Approvals {
  /** Verifies a merchant-signed invoice and creates (or finds) its pending request. Nothing is stored on refusal. */
  request(invoice: string): Promise<RequestOutcome>;
  /**
   * The request already made for exactly these invoice bytes (verified when it was made), whatever
   * its state now, expired included: a retry after the invoice expired still learns how its request
   * ended. `undefined` when there is none. Creates nothing.
   */
  existing(invoice: string): Promise<Extract<RequestOutcome, { ok: true }> | undefined>;
  /** Long-polls until the request is decided or `timeoutMs` passes. Never blocks other callers. */
  wait(input: {
    readonly approvalId: string;
    readonly timeoutMs: number;
    readonly signal?: AbortSignal;
  }): Promise<WaitOutcome>;
  /** Requests a role may decide now, with their signed terms. */
  pendingFor(role: Role): Promise<readonly ApprovalView[]>;
  get(approvalId: string): Promise<ApprovalView | undefined>;
  /**
   * Issues the member's `OrderApproval` over a passkey assertion the caller verified, after checking
   * it again with the enrolled key: an approval is only ever issued over a verified assertion.
   */
  approve(input: {
    readonly approvalId: string;
    readonly role: Role;
    readonly assertion: PasskeyAssertion;
  }): Promise<DecisionOutcome>;
  decline(input: { readonly approvalId: string; readonly role: Role }): Promise<DecisionOutcome>;
  /**
   * Hands an order the household approved on the parent's standing allowance alone to the parent,
   * once (the payments side calls this when the allowance's hold refuses the charge): the request
   * asks the parent too from now on, keeps the child's approval and its invoice's expiry, and its
   * waiters wake. Refused when the request is not approved on the child's approval alone (already
   * handed over, approved by the parent, paid, declined or expired).
   */
  handToParent(input: {
    readonly approvalId: string;
    readonly cause: ApprovalHandoverCause;
    readonly allowanceId: string;
    readonly period?: 'day' | 'week';
  }): Promise<DecisionOutcome>;
  /** Marks an approved request settled with its receipt (the payments side calls this). */
  settle(input: { readonly approvalId: string; readonly receipt: string }): Promise<DecisionOutcome>;
  /** Verifies the merchant's commitment against the settled request and completes the chain. */
  recordFulfillment(commitment: string): Promise<DecisionOutcome>;
}

/** Highest total that needs only the child; above it the parent too (SPEC §5.4). */
export const childOnlyLimitCents = 1000;
/** Highest total the household approves at all. */
export const householdLimitCents = 20_000;
/** Longest invoice JWS accepted. */
const INVOICE_LIMIT = 16_384;

const InvoiceSubject = z.object({
  merchantId: z.string().min(1).max(200),
  merchantName: z.string().min(1).max(200),
  items: z
    .array(
      z.object({
        sku: z.string().min(1).max(100),
        name: z.string().min(1).max(200),
        qty: z.number().int().min(1).max(1000),
        unitPriceCents: z.number().int().min(0),
        listPriceCents: z.number().int().min(0),
      }),
    )
    .min(1)
    .max(100),
  totalCents: z.number().int().min(1),
  currency: z.literal('usd'),
  deliverTo: z.string().min(1).max(500),
});

/** The roles that must approve a total, or why none can (SPEC §5.4). */
export function requiredRolesFor(totalCents: number): { ok: true; roles: Role[] } | { ok: false; reason: string } {
  if (totalCents <= childOnlyLimitCents) return { ok: true, roles: ['child'] };
  if (totalCents <= householdLimitCents) return { ok: true, roles: ['child', 'parent'] };
  return {
    ok: false,
    reason: `${dollars(totalCents)} is over the household's limit of ${dollars(householdLimitCents)}: no one in the household can approve it`,
  };
}

/** Durable approval requests over the household store (SPEC §5.4). */
export function createApprovals(options: ApprovalsOptions): Approvals {
  const { household } = options;
  const store = household.store.approvals;
  const clock = options.clock ?? (() => new Date());
  const emit = options.events ?? (() => {});
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  const verifyCredential = createCredentialVerifier(householdKeys(household));
  // A local decision wakes its waiters at once; another instance's, through the store's watch.
  const wakes = createDecisionWakes(store.watch?.bind(store));
  const notify = (approvalId: string) => wakes.notify(approvalId);
  const approveUrl = (role: Role) => `${options.origin}/approve?as=${role}`;
  const requested = (record: ApprovalRecord) =>
    ({
      ok: true,
      approvalId: record.approvalId,
      status: record.status,
      requiredRoles: record.requiredRoles,
      approveUrls: Object.fromEntries(record.requiredRoles.map((role) => [role, approveUrl(role)])),
      expiresAt: new Date(record.expiresAt).toISOString(),
    }) as const;

  /** Verifies a merchant-signed credential against the pinned key of a merchant the operator trusts. */
  async function verifyMerchantCredential(
    jws: string,
    type: 'Invoice' | 'FulfilmentCommitment',
  ): Promise<{ ok: true; credential: VerifiedCredential } | { ok: false; reason: string }> {
    const issuer = decodeSegment(jws.split('.')[1] ?? '')?.iss;
    const merchant = typeof issuer === 'string' ? await household.store.merchants.get(issuer) : undefined;
    if (!merchant) {
      return { ok: false, reason: `the ${type} is not from a merchant the household trusts` };
    }
    const verify = createCredentialVerifier((did) => (did === merchant.did ? merchant.publicKeyJwk : undefined));
    const verdict = await verify(jws, { type, issuer: merchant.did, now: clock() });
    return verdict.verified ? { ok: true, credential: verdict.credential } : { ok: false, reason: verdict.reason };
  }

  /** Expires a pending request whose invoice has expired; returns the current record. */
  async function current(approvalId: string): Promise<ApprovalRecord | undefined> {
    const record = await store.get(approvalId);
    if (record?.status !== 'pending' || clock().getTime() < record.expiresAt) return record;
    const now = clock().getTime();
    const reason = 'the invoice expired before every approval was given; ask the shop for a new invoice';
    if (await store.transition(approvalId, { from: ['pending'], to: 'expired', now, patch: { reason } })) {
      emit({ kind: 'approval-expired', approvalId, invoiceId: record.invoiceId });
      notify(approvalId);
    }
    return store.get(approvalId);
  }

  /**
   * The view, with the allowance that stands in for the parent when the order asks only the child
   * at a merchant where the parent keeps one (an allowance on record closes the solo tier there).
   */
  async function viewWithAllowance(record: ApprovalRecord, members: MemberNames): Promise<ApprovalView> {
    const view = { ...viewOf(record), members };
    if (options.allowances === undefined || record.requiredRoles.join() !== 'child') return view;
    const allowance = await options.allowances.standing({
      invoiceId: record.invoiceId,
      childDid: household.members.child,
      merchantDid: record.merchantDid,
      totalCents: record.totalCents,
    });
    return allowance === undefined ? view : { ...view, allowance };
  }

  const refuse = (reason: string) => {
    emit({ kind: 'approval-refused', reason });
    return { ok: false, reason } as const;
  };

  return {
    async request(invoice) {
      // 1. A bounded compact JWS from a merchant the operator trusts, signed with the pinned key, unexpired.
      if (typeof invoice !== 'string' || invoice.length > INVOICE_LIMIT)
        return refuse('the invoice is not a signed invoice');
      const verified = await verifyMerchantCredential(invoice, 'Invoice');
      if (!verified.ok) return refuse(verified.reason);
      // 2. Its terms, read from the verified bytes: the merchant named is the signer; the total adds up.
      const terms = InvoiceSubject.safeParse(verified.credential.subject);
      if (!terms.success) return refuse('the invoice terms are not well-formed');
      if (terms.data.merchantId !== verified.credential.iss)
        return refuse('the invoice names another merchant than its signer');
      const sum = terms.data.items.reduce((total, item) => total + item.qty * item.unitPriceCents, 0);
      if (sum !== terms.data.totalCents) return refuse('the invoice total is not the sum of its lines');
      // 3. Who must approve, from the signed total and the parent's allowance at this merchant.
      const required = requiredRolesFor(terms.data.totalCents);
      if (!required.ok) return refuse(required.reason);
      const cover = await options.allowances?.cover({
        childDid: household.members.child,
        merchantDid: verified.credential.iss,
        totalCents: terms.data.totalCents,
      });
      if (cover?.status === 'covered') required.roles = ['child'];
      if (cover?.status === 'not-covered') required.roles = ['child', 'parent'];
      // 4. One durable request per invoice: asking again returns the same request.
      const now = clock().getTime();
      const { record, created } = await store.create({
        approvalId: randomUUID(),
        invoiceId: verified.credential.jti,
        invoice,
        invoiceHash: invoiceHashOf(invoice),
        merchantDid: verified.credential.iss,
        totalCents: terms.data.totalCents,
        currency: terms.data.currency,
        requiredRoles: required.roles,
        approvals: {},
        status: 'pending',
        createdAt: now,
        expiresAt: verified.credential.exp * 1000,
        updatedAt: now,
      });
      if (created) {
        emit({
          kind: 'approval-created',
          approvalId: record.approvalId,
          invoiceId: record.invoiceId,
          totalCents: record.totalCents,
          requiredRoles: record.requiredRoles,
        });
      }
      return requested(record);
    },

    async existing(invoice) {
      if (typeof invoice !== 'string' || invoice.length > INVOICE_LIMIT) return undefined;
      // Looked up by the id the bytes claim, then kept only if they are the very bytes verified at creation.
      const invoiceId = decodeSegment(invoice.split('.')[1] ?? '')?.jti;
      const found = typeof invoiceId === 'string' ? await store.getByInvoice(invoiceId) : undefined;
      if (found?.invoice !== invoice) return undefined;
      const record = await current(found.approvalId);
      return record && requested(record);
    },

    async wait({ approvalId, timeoutMs, signal }) {
      // The long-poll deadline is elapsed time (monotonic); expiry is the household clock's.
      const deadline = performance.now() + timeoutMs;
      const wake = wakes.open(approvalId, signal);
      try {
        for (;;) {
          const since = wake.count;
          const record = await current(approvalId);
          if (!record) throw new IdentityError('not-found', `there is no approval request ${approvalId}`);
          const left = deadline - performance.now();
          if (record.status !== 'pending' || left <= 0 || signal?.aborted) return outcomeOf(record);
          // Sleep until a decision here or on another instance, a poll (a store without a watch), expiry, or the deadline.
          const untilExpiry = record.expiresAt - clock().getTime();
          await wake.sleep(Math.max(1, Math.min(pollIntervalMs, left, untilExpiry)), since);
        }
      } finally {
        wake.close();
      }
    },

    async pendingFor(role) {
      const pending = await store.listPending();
      const now = clock().getTime();
      const members = await memberNamesOf(household.store.profile);
      return Promise.all(
        pending
          .filter((record) => record.requiredRoles.includes(role) && record.expiresAt > now)
          .map((record) => viewWithAllowance(record, members)),
      );
    },

    async get(approvalId) {
      const record = await current(approvalId);
      return record && viewWithAllowance(record, await memberNamesOf(household.store.profile));
    },

    async approve({ approvalId, role, assertion }) {
      // 1. A pending, unexpired request that needs this role and that it has not approved yet.
      const record = await current(approvalId);
      if (!record) return refuse(`there is no approval request ${approvalId}`);
      if (record.status !== 'pending') return refuse(`the request is ${record.status}, not pending`);
      if (!record.requiredRoles.includes(role)) return refuse(`the ${role} is not asked to approve this request`);
      if (record.approvals[role] !== undefined) return refuse(`the ${role} has already approved this request`);
      // 2. The passkey is enrolled for this role, and its assertion signs this invoice's hash.
      const passkey = await household.store.passkeys.get(assertion.credentialId);
      if (passkey?.role !== role) return refuse(`the passkey is not enrolled for the ${role}`);
      const assertionVerdict = await verifyAssertionFast(assertion, {
        challenge: record.invoiceHash,
        origin: options.origin,
        rpId: options.rpId,
        publicKeyJwk: passkey.publicKeyJwk,
      });
      if (!assertionVerdict.verified) return refuse(assertionVerdict.reason);
      // 3. The member signs the OrderApproval carrying that assertion.
      const now = clock();
      const approval = await household.issue({
        signer: role,
        type: 'OrderApproval',
        subject: household.members[role],
        claims: { role, invoiceHash: record.invoiceHash, approvalId, passkey: assertion },
        now,
      });
      // 4. What is stored must verify as the payment policy will read it.
      const check = await verifyOrderApproval(
        {
          invoice: record.invoice,
          approval,
          role,
          membership: household.memberships[role],
          enrollment: passkey.enrollment,
        },
        {
          adminDid: household.adminDid,
          webauthn: { rpId: options.rpId, origin: options.origin },
          now,
          verifyCredential,
          verifyAssertion: verifyAssertionFast,
        },
      );
      if (!check.verified)
        throw new IdentityError('issue-failed', `the issued approval does not verify: ${check.reason}`);
      // 5. Record it once; the last required approval moves the request to approved.
      if (!(await store.addApproval(approvalId, role, approval, now.getTime()))) {
        return refuse(`the request is no longer waiting for the ${role}`);
      }
      const updated = (await store.get(approvalId)) ?? record;
      const complete = updated.requiredRoles.every((required) => updated.approvals[required] !== undefined);
      if (complete) await store.transition(approvalId, { from: ['pending'], to: 'approved', now: now.getTime() });
      emit({ kind: 'approval-approved', approvalId, invoiceId: record.invoiceId, role, complete });
      notify(approvalId);
      return { ok: true, record: (await store.get(approvalId)) ?? updated };
    },

    async decline({ approvalId, role }) {
      const record = await current(approvalId);
      if (!record) return refuse(`there is no approval request ${approvalId}`);
      if (!record.requiredRoles.includes(role)) return refuse(`the ${role} is not asked to approve this request`);
      const reason = `the ${role} declined the order`;
      if (
        !(await store.transition(approvalId, {
          from: ['pending'],
          to: 'declined',
          now: clock().getTime(),
          patch: { reason },
        }))
      ) {
        return refuse(`the request is ${record.status}, not pending`);
      }
      emit({ kind: 'approval-declined', approvalId, invoiceId: record.invoiceId, role });
      notify(approvalId);
      return { ok: true, record: (await store.get(approvalId)) ?? record };
    },

    async handToParent({ approvalId, cause, allowanceId, period }) {
      const before = await store.get(approvalId);
      if (before === undefined) return { ok: false, reason: `there is no approval request ${approvalId}` };
      const at = clock().getTime();
      // One compare-and-set: approved, on the child's approval alone, never handed over. A racing
      // refusal of the same order finds it pending (or decided) and changes nothing.
      const handover = { cause, allowanceId, ...(period === undefined ? {} : { period }), at };
      if (!(await store.handToParent(approvalId, handover))) {
        return { ok: false, reason: `the request is ${before.status}, not approved on the allowance alone` };
      }
      emit({ kind: 'approval-handed-over', approvalId, invoiceId: before.invoiceId, cause, allowanceId });
      notify(approvalId);
      const record = await store.get(approvalId);
      return record ? { ok: true, record } : { ok: false, reason: `there is no approval request ${approvalId}` };
    },

    async settle({ approvalId, receipt }) {
      const before = await store.get(approvalId);
      if (before === undefined) return { ok: false, reason: `there is no approval request ${approvalId}` };
      if (
        !(await store.transition(approvalId, {
          from: ['approved'],
          to: 'settled',
          now: clock().getTime(),
          patch: { receipt },
        }))
      ) {
        return { ok: false, reason: 'only an approved request can be settled' };
      }
      emit({ kind: 'approval-settled', approvalId, invoiceId: before.invoiceId });
      notify(approvalId);
      const record = await store.get(approvalId);
      return record ? { ok: true, record } : { ok: false, reason: `there is no approval request ${approvalId}` };
    },

    async recordFulfillment(commitment) {
      // 1. A commitment signed by a trusted merchant with its pinned key.
      if (typeof commitment !== 'string' || commitment.length > INVOICE_LIMIT)
        return refuse('the commitment is not a signed commitment');
      const verified = await verifyMerchantCredential(commitment, 'FulfilmentCommitment');
      if (!verified.ok) return refuse(verified.reason);
      // 2. For an invoice of this household that was settled, by the merchant that signed the invoice.
      const invoiceId = verified.credential.subject.invoiceId;
      const record = typeof invoiceId === 'string' ? await store.getByInvoice(invoiceId) : undefined;
      if (!record) return refuse('the commitment is for an invoice the household has no request for');
      if (record.merchantDid !== verified.credential.iss)
        return refuse('the commitment is signed by another merchant than the invoice');
      if (record.status !== 'settled' || record.receipt === undefined)
        return refuse(`the order is ${record.status}, not settled`);
      // 3. It names the payment the household made.
      const paymentRef = (
        decodeSegment(record.receipt.split('.')[1] ?? '')?.vc as
          | { credentialSubject?: { paymentRef?: unknown } }
          | undefined
      )?.credentialSubject?.paymentRef;
      if (verified.credential.subject.paymentRef !== paymentRef) return refuse('the commitment names another payment');
      const done = await store.transition(record.approvalId, {
        from: ['settled'],
        to: 'fulfilled',
        now: clock().getTime(),
        patch: { commitment },
      });
      if (!done) return refuse('the order was already recorded as fulfilled');
      emit({ kind: 'approval-fulfilled', approvalId: record.approvalId, invoiceId: record.invoiceId });
      notify(record.approvalId);
      return { ok: true, record: (await store.get(record.approvalId)) ?? record };
    },
  };
}

function outcomeOf(record: ApprovalRecord): WaitOutcome {
  const { approvalId } = record;
  switch (record.status) {
    case 'pending':
      return {
        status: 'pending',
        approvalId,
        waitingFor: record.requiredRoles.filter((role) => !record.approvals[role]),
      };
    case 'declined':
    case 'expired':
      return { status: record.status, approvalId, reason: record.reason ?? `the request ${record.status}` };
    default: {
      const { child, parent } = record.approvals;
      if (child === undefined)
        throw new IdentityError('conflict', `approval ${approvalId} is ${record.status} without the child's approval`);
      return {
        status: 'approved',
        approvalId,
        evidence: {
          invoice: record.invoice,
          childApproval: child,
          ...(parent === undefined ? {} : { parentApproval: parent }),
        },
      };
    }
  }
}

/** The request as a window shows it: terms decoded from the merchant-signed invoice verified at creation. */
function viewOf(record: ApprovalRecord): Omit<ApprovalView, 'members'> {
  const payload = decodeSegment(record.invoice.split('.')[1] ?? '');
  const terms = InvoiceSubject.parse((payload?.vc as { credentialSubject?: unknown } | undefined)?.credentialSubject);
  return {
    approvalId: record.approvalId,
    status: record.status,
    terms: { invoiceId: record.invoiceId, ...terms },
    requiredRoles: record.requiredRoles,
    approvedRoles: record.requiredRoles.filter((role) => record.approvals[role] !== undefined),
    expiresAt: new Date(record.expiresAt).toISOString(),
    ...(record.reason === undefined ? {} : { reason: record.reason }),
    ...(record.handover === undefined
      ? {}
      : {
          handover: {
            cause: record.handover.cause,
            ...(record.handover.period === undefined ? {} : { period: record.handover.period }),
            at: new Date(record.handover.at).toISOString(),
          },
        }),
  };
}

function dollars(cents: number): string {
  return `$${(cents / 100).toFixed(2)}`;
}
