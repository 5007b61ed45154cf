import type { Role } from './store';

/**
 * The credential types of SPEC §5.2 and the invoice and commitment the shop signs, with their
 * lifetimes. Every one is a JWT-VC in one claim layout: `iss`, `sub`, `jti` (`urn:uuid:…`), `iat`,
 * `nbf`, `exp`, `vc.type`, and `vc.credentialSubject` without its `id` (moved to `sub`).
 */
export const lifetimeSeconds = {
  Invoice: 5 * 60,
  OrderApproval: 15 * 60,
  /** A person's yes to one gated non-payment call (docs/human-authority.md), spent once. */
  CallApproval: 15 * 60,
  /**
   * A parent's standing allowance (docs/human-authority.md "Standing allowances"): the household
   * signs it over the parent's passkey yes to its terms; it lives until the terms' expiry, at most a year.
   */
  Allowance: 366 * 24 * 60 * 60,
  PaymentReceipt: 24 * 60 * 60,
  FulfilmentCommitment: 24 * 60 * 60,
  FamilyMembership: 365 * 24 * 60 * 60,
  PasskeyEnrollment: 365 * 24 * 60 * 60,
  /**
   * The admin's signature over the audit chain's head (SPEC §8). Long-lived: it attests history,
   * and every start, every N rows and every stop signs a newer one.
   */
  AuditCheckpoint: 10 * 365 * 24 * 60 * 60,
} as const;

/** A credential type identity verifies; the second entry of `vc.type`. */
export type CredentialType = keyof typeof lifetimeSeconds;

/** Clock skew a verifier allows on `iat`/`nbf` (SPEC §5.2). */
export const clockSkewSeconds = 60;

/** The WebAuthn assertion an `OrderApproval` carries, every field base64url as the browser sent it. */
export interface PasskeyAssertion {
  readonly credentialId: string;
  readonly authenticatorData: string;
  readonly clientDataJSON: string;
  readonly signature: string;
}

/** `FamilyMembership` subject fields (besides `sub`). */
export interface MembershipClaims {
  readonly role: Role;
  readonly household: string;
}

/** `PasskeyEnrollment` subject fields. */
export interface EnrollmentClaims {
  readonly role: Role;
  readonly credentialId: string;
  readonly publicKeyJwk: Readonly<Record<string, string>>;
}

/** `AuditCheckpoint` subject fields: the audit chain's head at the moment the checkpoint was requested. */
export interface AuditCheckpointClaims {
  /** The last row covered (0: the empty chain). */
  readonly rowId: number;
  /** That row's hash (SHA-256, hex); the chain's genesis value for row 0. */
  readonly hash: string;
}

/** `OrderApproval` subject fields. */
export interface OrderApprovalClaims {
  readonly role: Role;
  readonly invoiceHash: string;
  readonly approvalId: string;
  readonly passkey: PasskeyAssertion;
}

/** `CallApproval` subject fields: the member's passkey yes to exactly one call (docs/human-authority.md). */
export interface CallApprovalClaims {
  readonly role: Role;
  /** The qualified tool name approved. */
  readonly tool: string;
  /** base64url SHA-256 of the call's RFC 8785 bytes `{"tool": …, "arguments": {…}}`. */
  readonly callHash: string;
  readonly requestId: string;
  readonly passkey: PasskeyAssertion;
}

/** `Allowance` subject fields: the parent's passkey yes to a standing allowance's terms, signed by the household. */
export interface AllowanceClaims {
  /** Always `parent`: only the parent can let the child order without asking. */
  readonly role: Role;
  /** The terms' RFC 8785 bytes: what the parent's window showed and what the hash covers. */
  readonly terms: string;
  /** base64url SHA-256 of `terms`: the passkey challenge. */
  readonly termsHash: string;
  readonly passkey: PasskeyAssertion;
}
