import {
  type AllowanceStore,
  type Household,
  type IdentityStore,
  parseCanonicalTerms,
  periodKeyOf,
} from '../../identity/index';
import { type LookupResolver, safeJsonParse } from '../../proxy/index';

/** Options of {@link familySpendLookups}. */
export interface FamilySpendLookupsOptions {
  /** The household: its members' DIDs and `FamilyMembership`s by role. */
  readonly household: Pick<Household, 'members' | 'memberships'>;
  /** Enrolled passkeys (with their `PasskeyEnrollment`) and the operator's trusted merchants. */
  readonly store: Pick<IdentityStore, 'passkeys' | 'merchants'>;
  /** The parent's standing allowances; without them no allowance is ever looked up (the tiers are as before). */
  readonly allowances?: AllowanceStore;
  /** The clock the current budget period is read at; default now. */
  readonly clock?: () => Date;
}

/**
 * The lookups the `family-spend` fetch plan names (policies/family-spend/fetchplan.json), served
 * by the identity store and never by the model:
 *
 * - `approverEvidence {approval}`: the admin-signed credentials an approval rests on — the
 *   `FamilyMembership` of the member whose DID is the approval's `iss`, and the
 *   `PasskeyEnrollment` stored for the passkey credential id it carries. The approval is decoded
 *   WITHOUT verification, only to know what to fetch: the policy verifies every signature and
 *   binding itself, so a lying approval can only fetch credentials that then fail to match it.
 *   Anything not found is `undefined` (the field is missing, and the call is denied).
 * - `trustedMerchants`: `[{did, jwk}]` of the merchants the operator pinned.
 * - `allowance {approval, arguments}`: the newest standing allowance the parent signed for the
 *   child whose DID is the approval's `iss`, at the merchant the call pays, whatever its state;
 *   with the parent's membership and the enrollment of the passkey it carries, whether it is
 *   revoked, and what the current period (in the allowance's own time zone) has held. The policy
 *   verifies it; the charge's hold then spends the budget atomically.
 */
export function familySpendLookups(options: FamilySpendLookupsOptions): Record<string, LookupResolver> {
  const { household, store } = options;
  return {
    async approverEvidence(args) {
      // 1. Read (unverified) who signed the approval and which passkey it carries.
      const claims = unverifiedClaims(args.approval);
      const issuer = claims?.iss;
      const credentialId = readPasskeyCredentialId(claims);
      if (typeof issuer !== 'string' || credentialId === undefined) return undefined;
      // 2. The membership of the member with that DID, if the household has one.
      const role = (Object.keys(household.members) as (keyof typeof household.members)[]).find(
        (candidate) => household.members[candidate] === issuer,
      );
      if (role === undefined) return undefined;
      const membership = household.memberships[role];
      // 3. The enrollment stored for that passkey, whoever it was enrolled for (the policy checks that).
      const passkey = await store.passkeys.get(credentialId);
      if (passkey === undefined) return undefined;
      return { membership, enrollment: passkey.enrollment };
    },
    async allowance(args) {
      const allowances = options.allowances;
      const child = unverifiedClaims(args.approval)?.iss;
      const call = args.arguments as { merchantId?: unknown } | undefined;
      if (allowances === undefined || typeof child !== 'string' || typeof call?.merchantId !== 'string')
        return undefined;
      const record = await allowances.latestFor(child, call.merchantId);
      if (record === undefined) return undefined;
      // Terms the store cannot read: the allowance is handed over all the same, and the policy refuses it.
      const terms = parseCanonicalTerms(record.terms);
      const spentCents =
        terms === undefined
          ? 0
          : await allowances.spentCents(
              record.allowanceId,
              periodKeyOf(terms, (options.clock ?? (() => new Date()))()),
            );
      const credentialId = readPasskeyCredentialId(unverifiedClaims(record.credential));
      const passkey = credentialId === undefined ? undefined : await store.passkeys.get(credentialId);
      return {
        credential: record.credential,
        membership: household.memberships.parent,
        // No enrolled passkey: an enrollment that cannot verify, so the policy refuses the allowance.
        enrollment: passkey?.enrollment ?? 'none.none.none',
        revoked: record.revokedAt !== undefined,
        spentCents,
      };
    },
    async trustedMerchants() {
      const merchants = await store.merchants.list();
      return merchants.map((merchant) => ({ did: merchant.did, jwk: { ...merchant.publicKeyJwk } }));
    },
  };
}

/** Longest approval the lookup decodes: the manifest caps a credential at 16 KiB. */
const MAX_JWS_LENGTH = 16_384;

/** The payload of a compact JWS, not verified; `undefined` when it is not one. */
function unverifiedClaims(jws: unknown): Record<string, unknown> | undefined {
  if (typeof jws !== 'string' || jws.length > MAX_JWS_LENGTH) return undefined;
  const payload = jws.split('.')[1];
  if (payload === undefined || !/^[A-Za-z0-9_-]+$/.test(payload)) return undefined;
  // Not JSON: nothing to look up; the policy denies the approval on its own.
  const parsed = safeJsonParse(Buffer.from(payload, 'base64url').toString('utf8'));
  const value = parsed.ok ? parsed.value : undefined;
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

function readPasskeyCredentialId(claims: Record<string, unknown> | undefined): string | undefined {
  const vc = claims?.vc as { credentialSubject?: { passkey?: { credentialId?: unknown } } } | undefined;
  const credentialId = vc?.credentialSubject?.passkey?.credentialId;
  return typeof credentialId === 'string' && credentialId.length > 0 ? credentialId : undefined;
}
