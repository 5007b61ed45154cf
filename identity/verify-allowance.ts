import { type AllowanceTerms, allowanceHashOf, parseCanonicalTerms } from './allowance-terms';
import type { VerifiedCredential } from './verify-credential';
import { verifyMemberPasskey } from './verify-member-passkey';
import type { ApprovalContext } from './verify-order-approval';

/** An allowance and the admin credentials the parent's passkey yes rests on. */
export interface AllowanceEvidence {
  /** The household-signed `Allowance` JWT-VC. */
  readonly allowance: string;
  /** The parent's `FamilyMembership` (admin-signed). */
  readonly membership: string;
  /** The `PasskeyEnrollment` (admin-signed) of the passkey the allowance carries. */
  readonly enrollment: string;
}

/** The verdict on an allowance. */
export type AllowanceVerdict =
  | { readonly verified: true; readonly credential: VerifiedCredential; readonly terms: AllowanceTerms }
  | { readonly verified: false; readonly reason: string };

/**
 * Verifies an `Allowance` field by field, as {@link verifyCallApproval} reads a `CallApproval`:
 * the household's signature, the parent it names, the terms read only from their canonical bytes
 * and their hash recomputed from them (never the hash the credential claims), the parent's role
 * from an admin-signed membership, and the parent's passkey assertion over that hash with the key
 * an admin-signed enrollment pins. Whether it covers an order is {@link allowanceCovers}.
 */
export async function verifyAllowance(
  evidence: AllowanceEvidence,
  context: ApprovalContext,
): Promise<AllowanceVerdict> {
  const refuse = (reason: string) => ({ verified: false, reason: `the allowance: ${reason}` }) as const;

  // 1. The household signed it: the admin's pinned key, never a member's own did:key.
  const verified = await context.verifyCredential(evidence.allowance, {
    type: 'Allowance',
    issuer: context.adminDid,
    now: context.now,
  });
  if (!verified.verified) return refuse(verified.reason);
  const { credential } = verified;
  // 2. It is the parent's yes: a member DID, in the parent role.
  const parent = credential.sub;
  if (parent === undefined || !parent.startsWith('did:key:')) return refuse('it names no member');
  if (credential.subject.role !== 'parent') return refuse('it is not signed for by the parent');
  // 3. The terms, from their canonical bytes only; their hash recomputed from those bytes.
  const termsText = credential.subject.terms;
  const terms = typeof termsText === 'string' ? parseCanonicalTerms(termsText) : undefined;
  if (terms === undefined || typeof termsText !== 'string')
    return refuse('its terms are not canonical allowance terms');
  const termsHash = allowanceHashOf(termsText);
  if (credential.subject.termsHash !== termsHash) return refuse('its terms hash is not the hash of its terms');
  // 4. The credential lives exactly as long as the terms say, and has started.
  if (credential.exp !== terms.expiresAt) return refuse('its expiry is not the one its terms state');
  if (Math.floor(context.now.getTime() / 1000) < terms.notBefore) return refuse('it has not started yet');

  // 5–7. The parent's role, the enrolled passkey, and the parent's signature over the terms' hash.
  const problem = await verifyMemberPasskey(
    {
      member: parent,
      role: 'parent',
      membership: evidence.membership,
      enrollment: evidence.enrollment,
      passkey: credential.subject.passkey,
      challenge: termsHash,
    },
    context,
  );
  if (problem !== undefined) return refuse(problem);
  return { verified: true, credential, terms };
}
