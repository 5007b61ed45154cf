import { createHash } from 'node:crypto';
import type { Role } from './store';
import type { CredentialVerifier, VerifiedCredential } from './verify-credential';
import { verifyMemberPasskey } from './verify-member-passkey';
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

  // 3–5. The member's role, the enrolled passkey, and the human's signature over this hash.
  const problem = await verifyMemberPasskey(
    {
      member,
      role: evidence.role,
      membership: evidence.membership,
      enrollment: evidence.enrollment,
      passkey: subject.passkey,
      challenge: invoiceHash,
    },
    context,
  );
  if (problem !== undefined) return refuse(problem);
  return { verified: true, approval: approval.credential };
}
