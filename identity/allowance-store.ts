/** A signed standing allowance as the household keeps it (docs/human-authority.md "Standing allowances"). */
export interface AllowanceRecord {
  /** The terms' id (`urn:uuid:…`). */
  readonly allowanceId: string;
  readonly childDid: string;
  readonly merchantDid: string;
  /** The household-signed `Allowance` JWT-VC. */
  readonly credential: string;
  /** The terms' RFC 8785 bytes, as the credential carries them. */
  readonly terms: string;
  /** Milliseconds since the epoch. */
  readonly createdAt: number;
  readonly expiresAt: number;
  /** Set once, when the parent revoked it. */
  readonly revokedAt?: number;
  /** The newest hold sequence when it was revoked: every hold it will ever have is at most this. */
  readonly revokedAfterSequence?: number;
}

/** What {@link AllowanceStore.hold} did with an order's amount. */
export type AllowanceHoldResult =
  | {
      readonly ok: true;
      /** What is left of the period's budget after this order. */
      readonly remainingCents: number;
      /** The order already held this amount (a retry of the same charge): nothing was added. */
      readonly existing: boolean;
    }
  | { readonly ok: false; readonly reason: 'revoked' | 'unknown' }
  | { readonly ok: false; readonly reason: 'over-budget'; readonly remainingCents: number };

/** One order's spend against an allowance's budget in one period. */
export interface AllowanceHold {
  readonly allowanceId: string;
  /** The period in the terms' time zone (`2026-12-03` for a day, `2026-W49` for a week). */
  readonly periodKey: string;
  /** The invoice `jti`: at most one hold per order. */
  readonly invoiceId: string;
  readonly amountCents: number;
  /** The period's budget, from the verified terms. */
  readonly budgetCents: number;
  readonly now: number;
}

/**
 * Standing allowances, their revocations and their spent budgets. `hold` and `revoke` are each one
 * transaction that reads the other's row, so a spend and a revocation are ordered: a hold either
 * came before the revocation, or is refused. Every implementation must be correct across
 * processes sharing the store.
 */
export interface AllowanceStore {
  /** Inserts a signed allowance. */
  put(record: AllowanceRecord): Promise<void>;
  get(allowanceId: string): Promise<AllowanceRecord | undefined>;
  /** Every allowance, newest first (revoked and expired ones too: the parent's window greys them). */
  list(): Promise<readonly AllowanceRecord[]>;
  /** The newest allowance for a child at a merchant, whatever its state. */
  latestFor(childDid: string, merchantDid: string): Promise<AllowanceRecord | undefined>;
  /** Marks it revoked at `now` iff it is not yet; `false` when it was already revoked or is unknown. */
  revoke(allowanceId: string, now: number): Promise<boolean>;
  /**
   * Atomically, in one transaction: refused if the allowance is revoked; the order's existing hold
   * if it has one; refused if the period's held and spent cents plus this amount exceed the
   * budget; else holds the amount.
   */
  hold(hold: AllowanceHold): Promise<AllowanceHoldResult>;
  /** Frees an order's hold (the rail declined it: nothing was spent). A no-op without one. */
  release(invoiceId: string): Promise<void>;
  /** Held and spent cents of an allowance in a period. */
  spentCents(allowanceId: string, periodKey: string): Promise<number>;
  /** The allowance an order's amount is held against, if any (for the audit page and the order card). */
  holdOf(invoiceId: string): Promise<(AllowanceHold & { readonly sequence: number }) | undefined>;
}
