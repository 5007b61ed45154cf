import { createHash } from 'node:crypto';
import type { PasskeyAssertion } from './credentials';
import type { Role } from './store';
import type { CredentialVerifier, VerifiedCredential } from './verify-credential';
import type { AssertionVerifier } from './verify-passkey-assertion';

/** One approver's evidence for one invoice: the approval and the admin credentials it rests on. */
export interface ApprovalEvidence {
  /** The merchant-signed invoice JWS the approval must be bound to. */
  readonly invoice: string;
  /** The member's `OrderApproval`. */
  readonly approval: string;
  /** The role this leg must prove. */
  readonly role: Role;
  /** The approver's `FamilyMembership` (admin-signed). */
  readonly membership: string;
  /** The `PasskeyEnrollment` (admin-signed) of the passkey the approval carries. */
  readonly enrollment: string;
}

/** The household facts a verifier needs: never from the evidence. */
export interface ApprovalContext {
  readonly adminDid: string;
  readonly webauthn: { readonly rpId: string; readonly origin: string };
  readonly now: Date;
  readonly verifyCredential: CredentialVerifier;
  readonly verifyAssertion: AssertionVerifier;
}

/** The verdict on one approval leg. */
export type ApprovalVerdict =
  | { readonly verified: true; readonly approval: VerifiedCredential }
  | { readonly verified: false; readonly reason: string };

/** `invoiceHash` (SPEC §5.2): base64url(SHA-256(ASCII of the compact invoice JWS)). */
export function invoiceHashOf(invoice: string): string {
  return createHash('sha256').update(invoice, 'ascii').digest('base64url');
}

/**
 * Verifies one approval leg as SPEC §7.1 reads it: the member's `OrderApproval` over this invoice,
 * the member's role from an admin-signed membership, and the human's passkey assertion over the
 * invoice hash with the key an admin-signed enrollment pins. Evidence is bound twice: the member's
 * DID signature and the passkey the human holds.
 */
export async function verifyOrderApproval(
  evidence: ApprovalEvidence,
  context: ApprovalContext,
): Promise<ApprovalVerdict> {
  const { now, adminDid } = context;
  const refuse = (reason: string) =>
    ({ verified: false, reason: `the ${evidence.role}'s approval: ${reason}` }) as const;

  // 1. The OrderApproval verifies against its issuer's own key (a member did:key, never the admin).
  const approval = await context.verifyCredential(evidence.approval, { type: 'OrderApproval', now });
  if (!approval.verified) return refuse(approval.reason);
  const member = approval.credential.iss;
  if (member === adminDid || !member.startsWith('did:key:')) return refuse('it is not signed by a member');
  // 2. It is about the member themself, for this role and this invoice.
  const subject = approval.credential.subject;
  if (approval.credential.sub !== member) return refuse('it approves for someone other than its signer');
  if (subject.role !== evidence.role)
    return refuse(`it is a ${String(subject.role)} approval, not a ${evidence.role} one`);
  const invoiceHash = invoiceHashOf(evidence.invoice);
  if (subject.invoiceHash !== invoiceHash) return refuse('it approves another invoice');

  // 3. The member holds the role: a membership the admin signed, naming that DID and role.
  const membership = await context.verifyCredential(evidence.membership, {
    type: 'FamilyMembership',
    issuer: adminDid,
    now,
  });
  if (!membership.verified) return refuse(membership.reason);
  if (membership.credential.sub !== member) return refuse('the membership is for another member');
  if (membership.credential.subject.role !== evidence.role) return refuse(`the member is not the ${evidence.role}`);
  if (membership.credential.subject.household !== adminDid) return refuse('the membership is of another household');

  // 4. The passkey: an enrollment the admin signed for that member, role and credential id.
  const passkey = subject.passkey as Partial<PasskeyAssertion> | undefined;
  if (!isAssertion(passkey)) return refuse('it carries no passkey assertion');
  const enrollment = await context.verifyCredential(evidence.enrollment, {
    type: 'PasskeyEnrollment',
    issuer: adminDid,
    now,
  });
  if (!enrollment.verified) return refuse(enrollment.reason);
  const enrolled = enrollment.credential.subject;
  if (enrollment.credential.sub !== member || enrolled.role !== evidence.role) {
    return refuse('the passkey is enrolled for another member');
  }
  if (enrolled.credentialId !== passkey.credentialId) return refuse('the passkey is not the enrolled one');
  if (!isJwk(enrolled.publicKeyJwk)) return refuse('the enrollment carries no passkey key');

  // 5. The human's passkey signed the invoice hash, on the household's origin.
  const assertion = await context.verifyAssertion(passkey, {
    challenge: invoiceHash,
    origin: context.webauthn.origin,
    rpId: context.webauthn.rpId,
    publicKeyJwk: enrolled.publicKeyJwk,
  });
  if (!assertion.verified) return refuse(assertion.reason);
  return { verified: true, approval: approval.credential };
}

function isAssertion(value: Partial<PasskeyAssertion> | undefined): value is PasskeyAssertion {
  return (
    typeof value === 'object' &&
    value !== null &&
    ['credentialId', 'authenticatorData', 'clientDataJSON', 'signature'].every(
      (field) => typeof value[field as keyof PasskeyAssertion] === 'string',
    )
  );
}

function isJwk(value: unknown): value is Record<string, string> {
  return (
    typeof value === 'object' &&
    value !== null &&
    Object.values(value).every((field) => typeof field === 'string') &&
    (value as Record<string, string>).kty === 'EC'
  );
}
