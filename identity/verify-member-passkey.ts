import type { PasskeyAssertion } from './credentials';
import type { Role } from './store';
import type { ApprovalContext } from './verify-order-approval';

/** The member half of one approval leg: who signed it, in which role, with which passkey, over what. */
export interface MemberPasskeyLeg {
  /** The member DID that signed the approval credential. */
  readonly member: string;
  readonly role: Role;
  /** The approver's `FamilyMembership` (admin-signed). */
  readonly membership: string;
  /** The `PasskeyEnrollment` (admin-signed) of the passkey the approval carries. */
  readonly enrollment: string;
  /** The passkey assertion the approval credential carries, unchecked. */
  readonly passkey: unknown;
  /** What the passkey must have signed: the hash of exactly what is approved. */
  readonly challenge: string;
}

/**
 * Steps 3 to 5 of every approval leg (SPEC §7.1), the same for an `OrderApproval` and a
 * `CallApproval`: the member holds the role by an admin-signed membership, the passkey is the one
 * an admin-signed enrollment pins for that member and role, and the human's passkey signed the
 * challenge on the household's origin. Returns why not, or `undefined` when every step holds.
 */
export async function verifyMemberPasskey(
  leg: MemberPasskeyLeg,
  context: ApprovalContext,
): Promise<string | undefined> {
  const { now, adminDid } = context;
  const { member, role } = leg;

  // 3. The member holds the role: a membership the admin signed, naming that DID and role.
  const membership = await context.verifyCredential(leg.membership, {
    type: 'FamilyMembership',
    issuer: adminDid,
    now,
  });
  if (!membership.verified) return membership.reason;
  if (membership.credential.sub !== member) return 'the membership is for another member';
  if (membership.credential.subject.role !== role) return `the member is not the ${role}`;
  if (membership.credential.subject.household !== adminDid) return 'the membership is of another household';

  // 4. The passkey: an enrollment the admin signed for that member, role and credential id.
  const passkey = leg.passkey as Partial<PasskeyAssertion> | undefined;
  if (!isAssertion(passkey)) return 'it carries no passkey assertion';
  const enrollment = await context.verifyCredential(leg.enrollment, {
    type: 'PasskeyEnrollment',
    issuer: adminDid,
    now,
  });
  if (!enrollment.verified) return enrollment.reason;
  const enrolled = enrollment.credential.subject;
  if (enrollment.credential.sub !== member || enrolled.role !== role)
    return 'the passkey is enrolled for another member';
  if (enrolled.credentialId !== passkey.credentialId) return 'the passkey is not the enrolled one';
  if (!isJwk(enrolled.publicKeyJwk)) return 'the enrollment carries no passkey key';

  // 5. The human's passkey signed the challenge, on the household's origin.
  const assertion = await context.verifyAssertion(passkey, {
    challenge: leg.challenge,
    origin: context.webauthn.origin,
    rpId: context.webauthn.rpId,
    publicKeyJwk: enrolled.publicKeyJwk,
  });
  return assertion.verified ? undefined : assertion.reason;
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
