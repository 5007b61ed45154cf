import {
  type AllowanceStore,
  type ApprovalRecord,
  type CredentialVerifier,
  createVeramoVerifier,
  type Household,
  type IdentityStore,
  invoiceHashOf,
  type MemberNames,
  memberNamesOf,
  parseCanonicalTerms,
  type Role,
  type VerifiedCredential,
  verifyAllowance,
  verifyAssertionWithSimpleWebAuthn,
  verifyOrderApproval,
} from '../../identity/index';
import { safeJsonParse } from '../../proxy/index';
import { dollars } from '../agent/invoice-terms';
import type { AuditLog } from '../audit/audit-log';

/** The outcome of re-verifying one signature, now. */
export type LinkCheck = { readonly verified: true } | { readonly verified: false; readonly reason: string };

/** One link of an order's evidence chain: who signed what, what it binds, and whether it verifies now. */
export interface AuditLink {
  readonly step: 'terms' | 'approval' | 'allowance' | 'receipt' | 'commitment';
  /** "Terms signed by the merchant", "The parent's approval", … */
  readonly title: string;
  readonly signer: string;
  /** The facts the signature binds, as a person reads them (invoice hash, amount, merchant, role). */
  readonly binds: ReadonlyArray<{ readonly label: string; readonly value: string }>;
  readonly check: LinkCheck;
  /** The compact JWS as stored, shown on demand. */
  readonly jws: string;
}

/** An order as the audit list shows it. */
export interface OrderSummary {
  readonly invoiceId: string;
  readonly status: ApprovalRecord['status'];
  readonly totalCents: number;
  readonly merchantName: string;
  readonly createdAt: number;
}

/** One order's whole chain, each link re-verified on this request. */
export interface OrderAuditView extends OrderSummary {
  readonly links: readonly AuditLink[];
  /** Links the order has not reached yet ("the parent's approval", "payment receipt"), in words. */
  readonly pending: readonly string[];
  readonly checkedAt: string;
}

/** The audit page's reader (SPEC §8): orders, and one order's chain verified by the independent verifier. */
export interface OrderAudit {
  listOrders(limit?: number): Promise<readonly OrderSummary[]>;
  auditOrder(invoiceId: string): Promise<OrderAuditView | undefined>;
}

/** What {@link createOrderAudit} reads. */
export interface OrderAuditOptions {
  readonly store: IdentityStore;
  readonly household: Household;
  readonly webauthn: { readonly rpId: string; readonly origin: string };
  /**
   * The standing allowances and the audit chain: an order paid on an allowance shows the
   * allowance in place of the parent's approval, found by the chain's `allowance-spent` event.
   */
  readonly allowances?: Pick<AllowanceStore, 'get' | 'holdOf'>;
  readonly log?: Pick<AuditLog, 'forOrder'>;
  readonly clock?: () => Date;
}

/**
 * Re-verifies orders with Veramo (and SimpleWebAuthn for the passkeys), never the hot-path
 * verifier that admitted them: terms signed by a trusted merchant → each passkey approval →
 * the settlement service's receipt → the merchant's commitment to deliver. Each credential is
 * checked against its validity window at the moment it was issued, so an old order still audits.
 */
export function createOrderAudit(options: OrderAuditOptions): OrderAudit {
  const { store, household } = options;
  const clock = options.clock ?? (() => new Date());
  const veramo = createVeramoVerifier({ adminDocument: household.adminDocument });

  async function merchantName(record: ApprovalRecord): Promise<string> {
    const claims = claimsOf(record.invoice);
    const signed = typeof claims?.merchantName === 'string' ? claims.merchantName : undefined;
    return signed ?? (await store.merchants.get(record.merchantDid))?.name ?? record.merchantDid;
  }

  async function summary(record: ApprovalRecord): Promise<OrderSummary> {
    return {
      invoiceId: record.invoiceId,
      status: record.status,
      totalCents: record.totalCents,
      merchantName: await merchantName(record),
      createdAt: record.createdAt,
    };
  }

  async function termsLink(
    record: ApprovalRecord,
    name: string,
  ): Promise<{ link: AuditLink; terms?: VerifiedCredential }> {
    const claims = claimsOf(record.invoice);
    const binds = [
      { label: 'invoice id', value: record.invoiceId },
      { label: 'invoice hash', value: invoiceHashOf(record.invoice) },
      { label: 'amount', value: dollars(record.totalCents) },
      { label: 'merchant', value: `${name} (${record.merchantDid})` },
      { label: 'items', value: itemsOf(claims?.items) },
      { label: 'deliver to', value: String(claims?.deliverTo ?? '(none)') },
    ];
    const link = (check: LinkCheck) => ({
      step: 'terms' as const,
      title: 'Terms signed by the merchant',
      signer: record.merchantDid,
      binds,
      check,
      jws: record.invoice,
    });
    // 1. The merchant is one this household pinned (operator code only, SPEC §8).
    if ((await store.merchants.get(record.merchantDid)) === undefined) {
      return { link: link({ verified: false, reason: 'the signer is not a merchant this household trusts' }) };
    }
    // 2. The signature and claim layout, by the merchant's own did:key.
    const verdict = await veramo(record.invoice, {
      type: 'Invoice',
      issuer: record.merchantDid,
      now: issuedAt(record.invoice),
    });
    if (!verdict.verified) return { link: link({ verified: false, reason: verdict.reason }) };
    // 3. The stored order is what the merchant signed.
    const terms = verdict.credential;
    if (terms.jti !== record.invoiceId)
      return { link: link({ verified: false, reason: 'it is for another invoice id' }) };
    if (terms.subject.totalCents !== record.totalCents) {
      return { link: link({ verified: false, reason: 'its total is not the amount on record' }) };
    }
    if (terms.subject.merchantId !== terms.iss) {
      return { link: link({ verified: false, reason: 'it names another merchant than its signer' }) };
    }
    return { link: link({ verified: true }), terms };
  }

  async function approvalLink(
    record: ApprovalRecord,
    member: { readonly role: Role; readonly name?: string | undefined },
    approval: string,
  ): Promise<AuditLink> {
    const { role } = member;
    const claims = claimsOf(approval);
    const passkey = claims?.passkey as { credentialId?: unknown } | undefined;
    const credentialId = typeof passkey?.credentialId === 'string' ? passkey.credentialId : '';
    const enrolled = credentialId === '' ? undefined : await store.passkeys.get(credentialId);
    const link = (check: LinkCheck, signer: string): AuditLink => ({
      step: 'approval',
      title: `${whose(member)} approval with a passkey`,
      signer,
      binds: [
        { label: 'role', value: role },
        { label: 'invoice hash', value: typeof claims?.invoiceHash === 'string' ? claims.invoiceHash : '(none)' },
        { label: 'passkey', value: credentialId || '(none)' },
      ],
      check,
      jws: approval,
    });
    const iss = payloadOf(approval)?.iss;
    const signer = typeof iss === 'string' ? iss : '(unknown)';
    if (enrolled === undefined)
      return link({ verified: false, reason: 'its passkey is not enrolled in this household' }, signer);
    const verdict = await verifyOrderApproval(
      {
        invoice: record.invoice,
        approval,
        role,
        membership: household.memberships[role],
        enrollment: enrolled.enrollment,
      },
      {
        adminDid: household.adminDid,
        webauthn: options.webauthn,
        now: issuedAt(approval),
        verifyCredential: veramo,
        verifyAssertion: verifyAssertionWithSimpleWebAuthn,
      },
    );
    return link(verdict.verified ? { verified: true } : { verified: false, reason: verdict.reason }, signer);
  }

  /**
   * The allowance that stood in for the parent's approval: the chain's `allowance-spent` event
   * names it and what it left; the household-signed `Allowance` is re-verified (Veramo, then the
   * parent's passkey over the terms' hash with SimpleWebAuthn) and must be for this order's
   * merchant and child, within its per-order cap.
   */
  async function allowanceLink(record: ApprovalRecord, parentName: string | undefined): Promise<AuditLink | undefined> {
    if (options.log === undefined || options.allowances === undefined || record.approvals.parent !== undefined)
      return undefined;
    const spent = (await options.log.forOrder(record.invoiceId)).find(
      (entry) => entry.event.kind === 'allowance-spent',
    );
    const allowanceId = spent?.event.data?.allowanceId;
    if (spent === undefined || typeof allowanceId !== 'string') return undefined;
    const left = spent.event.data?.remainingCents;
    const stored = await options.allowances.get(allowanceId);
    const hold = await options.allowances.holdOf(record.invoiceId);
    const terms = stored === undefined ? undefined : parseCanonicalTerms(stored.terms);
    const per = terms?.period === 'week' ? 'a week' : 'a day';
    const link = (check: LinkCheck): AuditLink => ({
      step: 'allowance',
      title: `${whose({ role: 'parent', name: parentName })} standing allowance, in place of the parent's approval`,
      signer: household.adminDid,
      binds: [
        { label: 'allowance id', value: allowanceId },
        { label: 'merchant', value: terms === undefined ? '(none)' : `${terms.merchantName} (${terms.merchantDid})` },
        { label: 'per order', value: terms === undefined ? '(none)' : `up to ${dollars(terms.perOrderCapCents)}` },
        {
          label: 'budget',
          value: terms === undefined ? '(none)' : `${dollars(terms.budgetCents)} ${per} (${terms.timeZone})`,
        },
        {
          label: 'valid until',
          value: terms === undefined ? '(none)' : new Date(terms.expiresAt * 1000).toISOString(),
        },
        { label: 'left after this order', value: typeof left === 'number' ? dollars(left) : '(not recorded)' },
        { label: 'chain row', value: `#${spent.id}` },
        {
          label: 'budget hold',
          value: hold === undefined ? '(none)' : `#${hold.sequence}: ${dollars(hold.amountCents)} in ${hold.periodKey}`,
        },
      ],
      check,
      jws: stored?.credential ?? '',
    });
    if (stored === undefined || terms === undefined)
      return link({ verified: false, reason: 'the allowance the chain names is not on record' });
    const passkeyId = (claimsOf(stored.credential)?.passkey as { credentialId?: unknown } | undefined)?.credentialId;
    const enrolled = typeof passkeyId === 'string' ? await store.passkeys.get(passkeyId) : undefined;
    if (enrolled === undefined)
      return link({ verified: false, reason: 'its passkey is not enrolled in this household' });
    const verdict = await verifyAllowance(
      { allowance: stored.credential, membership: household.memberships.parent, enrollment: enrolled.enrollment },
      {
        adminDid: household.adminDid,
        webauthn: options.webauthn,
        now: issuedAt(stored.credential),
        verifyCredential: veramo,
        verifyAssertion: verifyAssertionWithSimpleWebAuthn,
      },
    );
    if (!verdict.verified) return link({ verified: false, reason: verdict.reason });
    // The verified terms, not the row, decide whether it was this order's to stand in for.
    if (verdict.terms.id !== allowanceId) return link({ verified: false, reason: 'it is another allowance' });
    if (verdict.terms.merchantDid !== record.merchantDid)
      return link({ verified: false, reason: 'it is for another merchant' });
    if (verdict.terms.childDid !== household.members.child)
      return link({ verified: false, reason: 'it is for another child' });
    if (record.totalCents > verdict.terms.perOrderCapCents)
      return link({ verified: false, reason: 'the order is over its per-order cap' });
    if (hold?.allowanceId !== allowanceId)
      return link({ verified: false, reason: 'no budget hold of this order on it' });
    return link({ verified: true });
  }

  async function receiptLink(record: ApprovalRecord, receipt: string): Promise<AuditLink> {
    const claims = claimsOf(receipt);
    const link = (check: LinkCheck): AuditLink => ({
      step: 'receipt',
      title: 'Payment receipt signed by the settlement service',
      signer: household.settlementDid,
      binds: [
        { label: 'invoice id', value: String(claims?.invoiceId ?? '(none)') },
        { label: 'invoice hash', value: String(claims?.invoiceHash ?? '(none)') },
        { label: 'amount', value: typeof claims?.amountCents === 'number' ? dollars(claims.amountCents) : '(none)' },
        { label: 'merchant', value: String(claims?.merchantId ?? '(none)') },
        { label: 'payment reference', value: String(claims?.paymentRef ?? '(none)') },
      ],
      check,
      jws: receipt,
    });
    return link(
      await checkBound(veramo, receipt, { type: 'PaymentReceipt', issuer: household.settlementDid }, (subject) =>
        subject.invoiceId !== record.invoiceId
          ? 'it is for another invoice'
          : subject.invoiceHash !== record.invoiceHash
            ? 'it pays another version of the invoice'
            : subject.amountCents !== record.totalCents
              ? 'it pays another amount'
              : subject.merchantId !== record.merchantDid
                ? 'it pays another merchant'
                : undefined,
      ),
    );
  }

  async function commitmentLink(record: ApprovalRecord, commitment: string, paymentRef: unknown): Promise<AuditLink> {
    const claims = claimsOf(commitment);
    const link = (check: LinkCheck): AuditLink => ({
      step: 'commitment',
      title: 'Delivery commitment signed by the merchant',
      signer: record.merchantDid,
      binds: [
        { label: 'invoice id', value: String(claims?.invoiceId ?? '(none)') },
        { label: 'payment reference', value: String(claims?.paymentRef ?? '(none)') },
        { label: 'deliver to', value: String(claims?.deliverTo ?? '(none)') },
        { label: 'ETA', value: typeof claims?.etaMinutes === 'number' ? `${claims.etaMinutes} minutes` : '(none)' },
      ],
      check,
      jws: commitment,
    });
    return link(
      await checkBound(veramo, commitment, { type: 'FulfilmentCommitment', issuer: record.merchantDid }, (subject) =>
        subject.invoiceId !== record.invoiceId
          ? 'it commits to another invoice'
          : subject.paymentRef !== paymentRef
            ? 'it names another payment than the receipt'
            : undefined,
      ),
    );
  }

  return {
    async listOrders(limit = 50) {
      return Promise.all((await store.approvals.listRecent(limit)).map(summary));
    },
    async auditOrder(invoiceId) {
      const record = await store.approvals.getByInvoice(invoiceId);
      if (record === undefined) return undefined;
      const head = await summary(record);
      const links: AuditLink[] = [];
      const pending: string[] = [];
      links.push((await termsLink(record, head.merchantName)).link);
      // The household's names label the steps; the role each credential binds is what verifies.
      const members: MemberNames = await memberNamesOf(store.profile);
      for (const role of record.requiredRoles) {
        const approval = record.approvals[role];
        const member = { role, name: members[role] };
        if (approval === undefined) pending.push(`${whose(member).replace(/^The /, 'the ')} approval`);
        else links.push(await approvalLink(record, member, approval));
      }
      const allowance = await allowanceLink(record, members.parent);
      if (allowance !== undefined) links.push(allowance);
      if (record.receipt === undefined) pending.push('the payment receipt');
      else links.push(await receiptLink(record, record.receipt));
      if (record.commitment === undefined) pending.push('the delivery commitment');
      else links.push(await commitmentLink(record, record.commitment, claimsOf(record.receipt ?? '')?.paymentRef));
      return { ...head, links, pending, checkedAt: clock().toISOString() };
    },
  };
}

/** "Sam's (the child's)" with a name the household set, else "The child's". */
function whose(member: { readonly role: Role; readonly name?: string | undefined }): string {
  return member.name === undefined ? `The ${member.role}'s` : `${member.name}'s (the ${member.role}'s)`;
}

/** Verifies a credential with Veramo at its issue time, then the order's bindings on its verified claims. */
async function checkBound(
  verify: CredentialVerifier,
  jws: string,
  expected: { readonly type: 'PaymentReceipt' | 'FulfilmentCommitment'; readonly issuer: string },
  mismatch: (subject: Readonly<Record<string, unknown>>) => string | undefined,
): Promise<LinkCheck> {
  const verdict = await verify(jws, { ...expected, now: issuedAt(jws) });
  if (!verdict.verified) return { verified: false, reason: verdict.reason };
  const reason = mismatch(verdict.credential.subject);
  return reason === undefined ? { verified: true } : { verified: false, reason };
}

/**
 * A JWS payload, read without verifying: only to label a link and to pick the moment to verify at.
 * Every fact the page marks verified comes from the verifier's own reading.
 */
function payloadOf(jws: string): Record<string, unknown> | undefined {
  const parsed = safeJsonParse(Buffer.from(jws.split('.')[1] ?? '', 'base64url').toString('utf8'));
  return parsed.ok && typeof parsed.value === 'object' && parsed.value !== null
    ? (parsed.value as Record<string, unknown>)
    : undefined;
}

/** The unverified `vc.credentialSubject` of a JWS (see {@link payloadOf}). */
function claimsOf(jws: string): Record<string, unknown> | undefined {
  const subject = (payloadOf(jws)?.vc as { credentialSubject?: unknown } | undefined)?.credentialSubject;
  return typeof subject === 'object' && subject !== null ? (subject as Record<string, unknown>) : undefined;
}

/** When a credential says it was issued (`iat`); one without is checked at the epoch, and fails. */
function issuedAt(jws: string): Date {
  const iat = payloadOf(jws)?.iat;
  return new Date(typeof iat === 'number' ? iat * 1000 : 0);
}

/** Invoice lines as a person reads them: `1 × Large pepperoni pizza at $15.00`. */
function itemsOf(items: unknown): string {
  if (!Array.isArray(items)) return '(none)';
  return items
    .map(
      (item: { name?: unknown; qty?: unknown; unitPriceCents?: unknown }) =>
        `${String(item.qty)} × ${String(item.name)}${typeof item.unitPriceCents === 'number' ? ` at ${dollars(item.unitPriceCents)}` : ''}`,
    )
    .join('; ');
}
