/**
 * The storage identity needs, declared here and implemented by the host (SPEC §2, §11): `lib/`
 * implements it on the one SQLite file; a shared database can implement it for several
 * instances. Every method is async and every state change that a race could double (using a code,
 * moving a counter, deciding an approval) is one atomic compare-and-set, so no correctness
 * property depends on one process's memory.
 */

/** A household member's role. The role of a passkey, a session and an approval comes from here only. */
export type Role = 'child' | 'parent';

/** Every role, in the order approvals are asked for. */
export const roles = ['child', 'parent'] as const satisfies readonly Role[];

/** Opaque JSON records by kind and id: Veramo's keys, encrypted private keys and DIDs, and the household. */
export interface RecordStore {
  get(kind: RecordKind, id: string): Promise<string | undefined>;
  /** Inserts or replaces. */
  put(kind: RecordKind, id: string, value: string): Promise<void>;
  /** Inserts only when absent; `false` when a record with that id exists (first writer wins). */
  insert(kind: RecordKind, id: string, value: string): Promise<boolean>;
  delete(kind: RecordKind, id: string): Promise<boolean>;
  list(kind: RecordKind): Promise<ReadonlyArray<{ readonly id: string; readonly value: string }>>;
  /**
   * Runs `work` holding the store-wide lock `name`: holders on every handle on the same store
   * (every instance on one database) take turns, so a one-time setup such as creating the
   * household runs once. The lock is released when `work` settles; `work`'s error is rethrown.
   */
  exclusive<T>(name: string, work: () => Promise<T>): Promise<T>;
}

/** What {@link RecordStore} holds. */
export type RecordKind = 'key' | 'private-key' | 'did' | 'household';

/** A one-time enrollment code (SPEC §5.3), stored hashed. */
export interface EnrollmentCodeRecord {
  readonly role: Role;
  /** SHA-256 of the code, hex. The code itself is never stored. */
  readonly codeHash: string;
  readonly issuedAt: number;
  readonly expiresAt: number;
  readonly usedAt?: number;
}

/** Enrollment codes, one live code per role, and failed attempts for rate limiting. */
export interface EnrollmentStore {
  /** Stores a fresh code for the role, invalidating any previous one. */
  replaceCode(record: EnrollmentCodeRecord): Promise<void>;
  /**
   * Stores a fresh code for the role iff it has no live code (unused and unexpired at `now`), in
   * one atomic step; `false` when a live code stays. A second instance starting beside the first
   * thus never voids the codes the first one printed.
   */
  issueCode(record: EnrollmentCodeRecord, now: number): Promise<boolean>;
  getCode(role: Role): Promise<EnrollmentCodeRecord | undefined>;
  /** Marks the code used iff it is this hash, unused and unexpired at `now`; `true` when this call used it. */
  consumeCode(role: Role, codeHash: string, now: number): Promise<boolean>;
  /** Records a failed attempt for the role at `now`, charged to `source` (an approval-window session). */
  addFailure(role: Role, now: number, source: string): Promise<void>;
  /** Failed attempts for the role at or after `since`: from every source, or from `source` only. */
  countFailures(role: Role, since: number, source?: string): Promise<number>;
}

/** An enrolled passkey (SPEC §5.3). */
export interface PasskeyRecord {
  /** base64url credential id, unique. */
  readonly credentialId: string;
  readonly role: Role;
  readonly memberDid: string;
  /** The WebAuthn user handle given at registration (base64url); an assertion must carry the same. */
  readonly userHandle: string;
  /** The credential's COSE public key, base64url, as SimpleWebAuthn verifies with it. */
  readonly publicKeyCose: string;
  /** The same key as a P-256 JWK, as the `PasskeyEnrollment` credential carries it. */
  readonly publicKeyJwk: Readonly<Record<string, string>>;
  readonly counter: number;
  readonly transports: readonly string[];
  /** The `PasskeyEnrollment` JWT-VC the admin issued for it. */
  readonly enrollment: string;
  readonly createdAt: number;
}

/** Enrolled passkeys and their sign counters. */
export interface PasskeyStore {
  /** `false` when the credential id is already enrolled. */
  add(record: PasskeyRecord): Promise<boolean>;
  get(credentialId: string): Promise<PasskeyRecord | undefined>;
  listByRole(role: Role): Promise<readonly PasskeyRecord[]>;
  /** Moves the counter iff it still is `expected`; `false` when another assertion moved it first. */
  updateCounter(credentialId: string, expected: number, next: number): Promise<boolean>;
}

/** A signed-in approval session; the cookie holds the token, the store its hash. */
export interface SessionRecord {
  readonly tokenHash: string;
  readonly role: Role;
  readonly memberDid: string;
  readonly credentialId: string;
  readonly createdAt: number;
  readonly expiresAt: number;
}

/** Approval-window sessions (SPEC §5.3), one per role per browser. */
export interface SessionStore {
  /** Stores a session, and forgets every session that expired by its `createdAt`. */
  create(record: SessionRecord): Promise<void>;
  get(tokenHash: string): Promise<SessionRecord | undefined>;
  delete(tokenHash: string): Promise<void>;
}

/** A WebAuthn ceremony in flight: the challenge the server issued and what it is for. */
export interface CeremonyRecord {
  readonly id: string;
  readonly kind: 'registration' | 'sign-in' | 'approval';
  /** base64url challenge as sent to the browser. */
  readonly challenge: string;
  /** Registration: the role of the code presented; approval: the signed-in role. */
  readonly role?: Role;
  /** Registration: the hash of the code presented, consumed when the ceremony verifies. */
  readonly codeHash?: string;
  /** Registration: the user handle offered to the authenticator. */
  readonly userHandle?: string;
  /** Approval: which request, and the session's credential. */
  readonly approvalId?: string;
  readonly expiresAt: number;
}

/** Ceremonies in flight; each is taken once. */
export interface CeremonyStore {
  /** Stores a ceremony, and forgets every ceremony that expired by `now` (abandoned prompts). */
  put(record: CeremonyRecord, now: number): Promise<void>;
  /** Returns and deletes the ceremony atomically: a challenge verifies at most once. */
  take(id: string): Promise<CeremonyRecord | undefined>;
}

/** Where an approval request is (SPEC §5.4). */
export type ApprovalStatus = 'pending' | 'approved' | 'declined' | 'expired' | 'settled' | 'fulfilled';

/** A durable approval request, created only from a merchant-signed invoice. */
export interface ApprovalRecord {
  readonly approvalId: string;
  /** The invoice's `jti`. One approval request per invoice. */
  readonly invoiceId: string;
  /** The merchant-signed invoice JWS, as received. */
  readonly invoice: string;
  readonly invoiceHash: string;
  readonly merchantDid: string;
  readonly totalCents: number;
  readonly currency: string;
  readonly requiredRoles: readonly Role[];
  /** `OrderApproval` JWT-VCs by role, as each member approved. */
  readonly approvals: Readonly<Partial<Record<Role, string>>>;
  readonly status: ApprovalStatus;
  /** Why it was declined or expired, in words. */
  readonly reason?: string;
  /** The `PaymentReceipt` once settled, the `FulfilmentCommitment` once fulfilled. */
  readonly receipt?: string;
  readonly commitment?: string;
  readonly createdAt: number;
  /** The invoice's `exp`, in ms: a pending approval expires with its invoice. */
  readonly expiresAt: number;
  readonly updatedAt: number;
  /**
   * Set once, when the charge found that the parent's standing allowance no longer covers an order
   * the household approved on it alone: the request then asks the parent too (docs/human-authority.md,
   * "An order the allowance no longer covers").
   */
  readonly handover?: ApprovalHandover;
}

/**
 * Why and when an order approved on the parent's standing allowance was handed to the parent: at
 * the charge, the allowance's hold was refused (its period's budget spent by other orders, revoked
 * since the child approved, or no longer valid for this order).
 */
export interface ApprovalHandover {
  readonly cause: ApprovalHandoverCause;
  /** The allowance that no longer covers the order. */
  readonly allowanceId: string;
  /** The allowance's period, for the windows' words ("its budget for today is spent"). */
  readonly period?: 'day' | 'week';
  /** Milliseconds since the epoch. */
  readonly at: number;
}

/** What the allowance's hold said when it refused: `budget-spent`, `revoked`, or `not-covered` (anything else). */
export type ApprovalHandoverCause = 'budget-spent' | 'revoked' | 'not-covered';

/** Approval requests. Transitions are compare-and-set on the status. */
export interface ApprovalStore {
  /** Inserts, or returns the existing request for the same invoice id (`created: false`). */
  create(record: ApprovalRecord): Promise<{ readonly record: ApprovalRecord; readonly created: boolean }>;
  get(approvalId: string): Promise<ApprovalRecord | undefined>;
  /** The request for an invoice id, if any. */
  getByInvoice(invoiceId: string): Promise<ApprovalRecord | undefined>;
  /** Pending requests, oldest first. */
  listPending(): Promise<readonly ApprovalRecord[]>;
  /** Requests of any status, newest first, at most `limit`. */
  listRecent(limit: number): Promise<readonly ApprovalRecord[]>;
  /** Stores a role's `OrderApproval` iff the request is pending and that role has not approved yet. */
  addApproval(approvalId: string, role: Role, credential: string, now: number): Promise<boolean>;
  /**
   * Moves the request to `to` iff its status is one of `from`, applying `patch`; `false` otherwise.
   * Every transition of SPEC §5.4 is one call, so two racing deciders cannot both win.
   */
  transition(
    approvalId: string,
    change: {
      readonly from: readonly ApprovalStatus[];
      readonly to: ApprovalStatus;
      readonly now: number;
      readonly patch?: { readonly reason?: string; readonly receipt?: string; readonly commitment?: string };
    },
  ): Promise<boolean>;
  /**
   * Hands an order approved on the child's approval alone to the parent, in one compare-and-set:
   * iff the request is `approved` without the parent's approval (an approved request has every role
   * it asks, so it asked only the child, and was never handed over: that asks the parent), it becomes `pending` asking the child and the parent, the child's approval kept,
   * with `handover` recorded; `false` otherwise. Of racing refusals of one request, one hands it over.
   */
  handToParent(approvalId: string, handover: ApprovalHandover): Promise<boolean>;
  /**
   * Calls `poke` whenever a change of the request commits, through any instance on the store (and
   * when the store cannot tell: after its listener reconnects); returns the stop. Stores shared by
   * several processes that can notify have it (PostgreSQL); a waiter without it polls.
   */
  watch?(approvalId: string, poke: () => void): () => void;
}

/** A merchant the operator trusts: its DID and the Ed25519 key pinned when it was trusted. */
export interface MerchantRecord {
  readonly did: string;
  readonly name: string;
  /** Ed25519 public JWK. */
  readonly publicKeyJwk: Readonly<Record<string, string>>;
  readonly trustedAt: number;
}

/** Trusted merchants: written only by operator code (CLI, runtime setup), never by a tool. */
export interface MerchantStore {
  /** Pins a merchant; `false` when that DID is already pinned (a changed key is never overwritten silently). */
  add(record: MerchantRecord): Promise<boolean>;
  get(did: string): Promise<MerchantRecord | undefined>;
  list(): Promise<readonly MerchantRecord[]>;
  remove(did: string): Promise<boolean>;
}

/** A member's display name, as the parent set it (docs/human-authority.md "Member names"). */
export interface MemberNameRecord {
  readonly role: Role;
  readonly name: string;
  readonly setAt: number;
}

/** The household's time zone, an IANA name: the one its first start found, or the one the parent set. */
export interface TimeZoneRecord {
  readonly timeZone: string;
  readonly setAt: number;
}

/**
 * What the household calls its members and the zone its days are counted in. Written only from the
 * parent's window and, for the zone, once by the household's first start: never by a tool.
 */
export interface HouseholdProfileStore {
  /** Every member's name that was set, in role order. */
  names(): Promise<readonly MemberNameRecord[]>;
  /** Sets or replaces a member's name. */
  setName(record: MemberNameRecord): Promise<void>;
  timeZone(): Promise<TimeZoneRecord | undefined>;
  /** Sets or replaces the household's zone. */
  setTimeZone(record: TimeZoneRecord): Promise<void>;
  /** Stores the zone iff none is stored, in one atomic step; `false` when one is (the first writer wins). */
  initTimeZone(record: TimeZoneRecord): Promise<boolean>;
}

/** Everything identity persists, by concern. */
export interface IdentityStore {
  readonly records: RecordStore;
  readonly enrollment: EnrollmentStore;
  readonly passkeys: PasskeyStore;
  readonly sessions: SessionStore;
  readonly ceremonies: CeremonyStore;
  readonly approvals: ApprovalStore;
  readonly merchants: MerchantStore;
  readonly profile: HouseholdProfileStore;
}
