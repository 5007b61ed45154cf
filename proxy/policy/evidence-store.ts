/** One piece of single-use evidence: its id from the signed payload and when it stops mattering. */
export interface EvidenceId {
  readonly id: string;
  /** Milliseconds since the epoch (the evidence's own `exp`); after this the entry may be purged. */
  readonly expiresAt: number;
}

/**
 * Where a held id stands (SPEC §4.7). `reserved`: a call holds it while its policy decides (a
 * lease, so a crash there frees it). `in-doubt`: the call was sent and its outcome is unknown, so
 * it is held, never freed by time, until settlement resolves it; while its sender's lease runs
 * (`sendingUntil`), the call may still be on its way. `spent`: it authorised its one action.
 */
export type EvidenceState = 'reserved' | 'in-doubt' | 'spent';

/**
 * How long a reservation holds its ids while its policy decides, unless a store is told otherwise:
 * a crash there leaves nothing sent, and the ids are free again once it lapses. A caller told
 * `payment_in_progress` by a reservation an instance that died left behind gets its answer only
 * after this long.
 */
export const DEFAULT_EVIDENCE_LEASE_MS = 60_000;

/** A held id as the store keeps it. */
export interface HeldEvidence {
  readonly id: string;
  readonly state: EvidenceState;
  /** The reservation holding it (absent only for entries older than reservations). */
  readonly reservation?: string;
  /** The fingerprint of the call that holds it (absent when reserved without one, e.g. spend on allow). */
  readonly fingerprint?: string;
  /** The serialised result the call settled with (spent on success only). */
  readonly result?: string;
  /**
   * In doubt only: until when (milliseconds since the epoch) the call's sender is known to be
   * still sending it, possibly from another instance. Before then a failure read from elsewhere
   * may only mean the sender has not got that far, so nobody but the sender may free the entry.
   */
  readonly sendingUntil?: number;
}

/** What {@link EvidenceStore.reserve} did: held every id, or none. */
export type ReserveResult =
  | { readonly ok: true; readonly reservation: string }
  | { readonly ok: false; readonly reason: 'full' }
  /**
   * Some id is already held (or the call names one id twice). `held` lists the live entries for
   * the requested ids, read in the same transaction, so the caller can tell a retry of the same
   * call from evidence reused for another one.
   */
  | { readonly ok: false; readonly reason: 'spent'; readonly id?: string; readonly held: readonly HeldEvidence[] };

/** Options of {@link EvidenceStore.reserve}. */
export interface ReserveOptions {
  /** The fingerprint of the call reserving (tool, arguments without credentials, evidence ids). */
  readonly fingerprint?: string;
}

/** Options of {@link EvidenceStore.markInDoubt}. */
export interface InDoubtOptions {
  /**
   * The sender's lease: until when (milliseconds since the epoch) it is sending the call. Absent:
   * nobody is sending it any more (the outcome came back unknown), so a retry may settle it at once.
   */
  readonly sendingUntil?: number;
}

/** Options of {@link EvidenceStore.commit}. */
export interface CommitOptions {
  /** The serialised result to replay to a retry of the same call. */
  readonly result?: string;
}

/**
 * Durable store of spent evidence (SPEC §4.7, §11). `reserve` is the atomic check-and-spend: it
 * either holds every id or none. Implementations must be correct across processes sharing the store.
 */
export interface EvidenceStore {
  /** Atomically: refuse if any id is held, refuse if the store is full (never evict), else reserve them all with a lease. */
  reserve(ids: readonly EvidenceId[], now: number, options?: ReserveOptions): Promise<ReserveResult>;
  /**
   * Moves a reservation from `reserved` to `in-doubt` before its call is sent, with the sender's
   * lease (`sendingUntil`): never purged by time from then on, so a call that may have run can
   * never be authorised again by waiting. On a reservation already in doubt, sets the sender's
   * lease again (absent: the sender is done with it). Throws when the reservation is no longer
   * held (its reservation lease lapsed, or it was settled).
   */
  markInDoubt(reservation: string, options?: InDoubtOptions): Promise<void>;
  /** Marks a reservation's ids (reserved or in doubt) spent for good, keeping `result` for replay. Throws when it is no longer held. */
  commit(reservation: string, options?: CommitOptions): Promise<void>;
  /** Frees a reservation's ids (reserved or in doubt): nothing was spent. A no-op when already gone. */
  release(reservation: string): Promise<void>;
  /** The live entries among `ids` (an expired reservation or expired spent evidence is not live; in-doubt always is). */
  lookup(ids: readonly string[], now: number): Promise<readonly HeldEvidence[]>;
  /** Whether an id is currently spent or held. */
  isSpent(id: string, now: number): Promise<boolean>;
  close(): Promise<void>;
}
