import { type ApprovedCall, callHashOf } from '../proxy/index';
import type { Role } from './store';
import type { VerifiedCredential } from './verify-credential';
import { verifyMemberPasskey } from './verify-member-passkey';
import type { ApprovalContext } from './verify-order-approval';

/** One approver's evidence for one gated call: the `CallApproval` and the admin credentials it rests on. */
export interface CallApprovalEvidence {
  /** The call as it arrives at the proxy: the approval must be over exactly this. */
  readonly call: ApprovedCall;
  /** The member's `CallApproval`. */
  readonly approval: string;
  /** The role this leg must prove. */
  readonly role: Role;
  /** The approver's `FamilyMembership` (admin-signed). */
  readonly membership: string;
  /** The `PasskeyEnrollment` (admin-signed) of the passkey the approval carries. */
  readonly enrollment: string;
}

/** The verdict on one call-approval leg. */
export type CallApprovalVerdict =
  | { readonly verified: true; readonly approval: VerifiedCredential }
  | { readonly verified: false; readonly reason: string };

/**
 * Verifies one `CallApproval` leg field by field against the actual call, the way
 * {@link verifyOrderApproval} reads an `OrderApproval`: the member's signature, the tool and the
 * call hash recomputed from the call as it arrives (never the hash the credential claims), the
 * role from an admin-signed membership, and the human's passkey assertion over that hash with the
 * key an admin-signed enrollment pins.
 */
export async function verifyCallApproval(
  evidence: CallApprovalEvidence,
  context: ApprovalContext,
): Promise<CallApprovalVerdict> {
  const { now, adminDid } = context;
  const refuse = (reason: string) =>
    ({ verified: false, reason: `the ${evidence.role}'s approval: ${reason}` }) as const;

  // 1. The CallApproval verifies against its issuer's own key (a member did:key, never the admin).
  const approval = await context.verifyCredential(evidence.approval, { type: 'CallApproval', now });
  if (!approval.verified) return refuse(approval.reason);
  const member = approval.credential.iss;
  if (member === adminDid || !member.startsWith('did:key:')) return refuse('it is not signed by a member');
  // 2. It is about the member themself, for this role, this tool and exactly these arguments.
  const subject = approval.credential.subject;
  if (approval.credential.sub !== member) return refuse('it approves for someone other than its signer');
  if (subject.role !== evidence.role)
    return refuse(`it is a ${String(subject.role)} approval, not a ${evidence.role} one`);
  if (subject.tool !== evidence.call.tool) return refuse('it approves another tool');
  let callHash: string;
  try {
    callHash = callHashOf(evidence.call);
  } catch {
    return refuse('the call has no canonical form, so no approval can be over it');
  }
  if (subject.callHash !== callHash) return refuse('it approves other arguments than this call has');

  // 3–5. The member's role, the enrolled passkey, and the human's signature over this hash.
  const problem = await verifyMemberPasskey(
    {
      member,
      role: evidence.role,
      membership: evidence.membership,
      enrollment: evidence.enrollment,
      passkey: subject.passkey,
      challenge: callHash,
    },
    context,
  );
  if (problem !== undefined) return refuse(problem);
  return { verified: true, approval: approval.credential };
}
