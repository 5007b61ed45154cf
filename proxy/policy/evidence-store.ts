/** One piece of single-use evidence: its id from the signed payload and when it stops mattering. */
export interface EvidenceId {
  readonly id: string;
  /** Milliseconds since the epoch (the evidence's own `exp`); after this the entry may be purged. */
  readonly expiresAt: number;
}

/** A reservation: held ids that are committed (spent) when the policy allows, or released when it does not. */
export type ReserveResult =
  | { readonly ok: true; readonly reservation: string }
  | { readonly ok: false; readonly reason: 'spent' | 'full'; readonly id?: string };

/**
 * Durable store of spent evidence (SPEC §4.7, §11). `reserve` is the atomic check-and-spend: it
 * either holds every id or none. Implementations must be correct across processes sharing the store.
 */
export interface EvidenceStore {
  /** Atomically: refuse if any id is spent or reserved, refuse if the store is full (never evict), else hold them all. */
  reserve(ids: readonly EvidenceId[], now: number): Promise<ReserveResult>;
  /** Marks a reservation's ids spent for good. */
  commit(reservation: string): Promise<void>;
  /** Frees a reservation's ids: the inner filter denied, so nothing was spent. */
  release(reservation: string): Promise<void>;
  /** Whether an id is currently spent or held. */
  isSpent(id: string, now: number): Promise<boolean>;
  close(): Promise<void>;
}
