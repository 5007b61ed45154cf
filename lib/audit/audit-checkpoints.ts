import type { AuditCheckpointClaims, Household } from '../../identity/index';
import type { AuditHead, AuditLog } from './audit-log';
import { checkAuditRow } from './check-audit-row';
import type { CheckpointLeaseHolder, CheckpointLeaseStore } from './checkpoint-lease';
import { type AuditCheckpoint, type CheckpointStore, createFileCheckpointStore } from './checkpoint-store';
import { genesisHash } from './hash-audit-row';
import { type CheckpointVerifier, createCheckpointVerifier } from './verify-checkpoint';
import type { Witness } from './witness';

export type { AuditCheckpoint } from './checkpoint-store';

/** File name of the checkpoints inside the data folder: outside the audited table, append-only, 0600. */
export const auditCheckpointsFileName = 'audit-checkpoints.jsonl';

/** Rows between two checkpoints when no other number is configured. */
export const defaultCheckpointEvery = 100;

/** How long a checkpoint lease lasts when no other time is configured; each checkpoint asked for renews it. */
export const defaultCheckpointLeaseMs = 30_000;

/** Kind of an {@link AuditCheckpointReport}: what the checkpointer has to say in words. */
export type AuditCheckpointReportKind =
  | 'audit-checkpoint-refused'
  | 'audit-tail-unvouched'
  | 'audit-witness-refused'
  | 'audit-witness-unreachable';

/**
 * Something a person must be told about the chain, as a runtime event: a checkpoint refused (the
 * chain does not verify from the previous checkpoint), rows no checkpoint will vouch for, a witness
 * that refused or could not be reached.
 */
export interface AuditCheckpointReport {
  readonly kind: AuditCheckpointReportKind;
  readonly outcome: 'deny' | 'error';
  readonly message: string;
  readonly data?: Readonly<Record<string, string | number>>;
}

/** Why this process signs no more checkpoints: the first row that does not verify, in words. */
export interface CheckpointRefusal {
  readonly rowId: number;
  readonly reason: string;
}

/** Options of {@link createAuditCheckpoints}. */
export interface AuditCheckpointsOptions {
  readonly audit: AuditLog;
  /** Signs with the admin key (SPEC §5.1), and verifies earlier checkpoints against its public key. */
  readonly household: Pick<Household, 'adminDid' | 'adminJwk' | 'issue'>;
  /** Where checkpoints are kept; default a file store at `path`. */
  readonly store?: CheckpointStore;
  /** The checkpoints file, normally `<data folder>/audit-checkpoints.jsonl` (when no `store` is given). */
  readonly path?: string;
  /**
   * The chain's head as earlier processes left it, read before this process appended a row; default
   * the head when this is called. Rows after the newest checkpoint up to it were never signed by the
   * process that wrote them: no checkpoint of this process vouches for them.
   */
  readonly inherited?: AuditHead;
  /**
   * The household's checkpoint lease, when several instances share the chain (SPEC §11): this
   * process signs a checkpoint only while it holds the lease, which each checkpoint asked for
   * takes or renews (default {@link defaultCheckpointLeaseMs}), which it renews every `renewMs`
   * while it holds it (default a third of the lease), and which `close` releases. Without it, this
   * process signs every checkpoint, and reports an unsigned tail at once.
   */
  readonly lease?: {
    readonly store: CheckpointLeaseStore;
    readonly owner: string;
    readonly ttlMs?: number;
    readonly renewMs?: number;
  };
  /** Every checkpoint is submitted to each (SPEC §8); their latest is checked at start. */
  readonly witnesses?: readonly Witness[];
  /**
   * A checkpoint whenever a row whose id is a multiple of it is appended, through this handle or
   * any other on the same database (the log's subscription delivers every row); default 100.
   */
  readonly every?: number;
  /** When a checkpoint is signed (`iat`); default the system clock. */
  readonly now?: () => Date;
  /** A checkpoint that could not be signed or written, or a witness fault. The audit rows are unaffected. */
  readonly onError?: (error: Error) => void;
  /**
   * What a person must read about the chain (the runtime records each as an event, so it is in the
   * chain too). A report of an unvouched tail is waited for when this returns a promise, so no
   * checkpoint signed after it leaves the report out.
   */
  readonly report?: (report: AuditCheckpointReport) => unknown;
}

/** Signs the chain's head into the checkpoint store, and hands each checkpoint to the witnesses (SPEC §8). */
export interface AuditCheckpoints {
  /**
   * Signs the head as it is at this call, after every earlier checkpoint is written, if the chain
   * verifies from the previous checkpoint. Resolves with the checkpoint, or `undefined` when this head
   * is already signed, the chain does not verify, or signing failed; never rejects.
   */
  checkpoint(): Promise<AuditCheckpoint | undefined>;
  /** Why this process refuses to sign, once it found the chain broken; `undefined` while it signs. */
  refused(): CheckpointRefusal | undefined;
  /** Stops the every-N checkpoints, signs the head, and waits until every checkpoint is written and witnessed. */
  close(): Promise<void>;
}

/** Rows read at a time while a segment of the chain is verified. */
const page = 1000;

/** Rows after the newest checkpoint that an earlier process wrote and nobody signed. */
interface UnsignedTail {
  readonly fromRow: number;
  readonly toRow: number;
  /** The newest checkpoint's row, just before them. */
  readonly checkpointRow: number;
}

/** An {@link UnsignedTail} waiting on the lease holder seen at start: alive, it signs them; gone, they are reported. */
interface PendingTail extends UnsignedTail {
  readonly seen: CheckpointLeaseHolder;
  /** Whether the holder was seen renewing once already (then a close need not wait for it). */
  readonly judged: boolean;
}

/**
 * Keeps signed checkpoints of the audit chain outside the audited table: every `every` rows and at
 * close the household admin signs `{rowId, hash}` of the head as an `AuditCheckpoint` credential,
 * so a verifier detects a deleted tail or a chain recomputed after an edit.
 *
 * A checkpoint is signed only over a chain verified from the previous checkpoint (SPEC §8, issue 26):
 * before the first one, the newest stored checkpoint's signature is checked against the admin key,
 * each witness's latest checkpoint too (the newest of them is where verification starts), and every
 * row from there to the head is re-walked (link, hash, canonical bytes); before each later one, the
 * rows since the last. A chain that does not verify is never signed again by this process, and the
 * refusal is reported in words. Rows an earlier process wrote after its last checkpoint (it crashed,
 * or someone rewrote them while it was stopped) are consistent or not, but nobody signed them: they
 * are reported as unvouched, and that report is a row of the chain before any later checkpoint, so
 * no signature ever passes them off as verified. When another instance holds a live checkpoint
 * lease at start, those rows may be its own, not signed yet: the holder renews its lease every
 * third of its term while it lives, so the report waits for one renewal period. A holder that
 * renewed will sign them (they are watched until a checkpoint covers them, and reported if it
 * stops renewing first); one that did not, or that released the lease with the rows unsigned,
 * stopped, and they are reported (docs/scale-out.md, "One audit chain, several writers").
 *
 * Signing is async and never delays `append`: the head is read when the checkpoint is requested,
 * signed later, and the checkpoints are written in request order. A failed checkpoint is reported and
 * loses no event.
 */
export function createAuditCheckpoints(options: AuditCheckpointsOptions): AuditCheckpoints {
  const every = options.every ?? defaultCheckpointEvery;
  if (!Number.isSafeInteger(every) || every < 1) throw new RangeError('checkpoint interval must be a positive integer');
  if (options.store === undefined && options.path === undefined)
    throw new TypeError('a checkpoint store or path is needed');
  const store = options.store ?? createFileCheckpointStore(options.path ?? '');
  const now = options.now ?? (() => new Date());
  const { audit, household } = options;
  const witnesses = options.witnesses ?? [];
  // Read now, before this process appends: what earlier processes left.
  const inherited = options.inherited === undefined ? audit.head() : Promise.resolve(options.inherited);
  // A failed read is reported when the first checkpoint is established, not as an unhandled rejection.
  inherited.catch(() => undefined);
  const verifyCheckpoint: CheckpointVerifier = createCheckpointVerifier({
    adminDid: household.adminDid,
    adminJwk: household.adminJwk,
    now,
  });
  const report = async (entry: AuditCheckpointReport): Promise<void> => {
    try {
      await options.report?.(entry);
    } catch (error) {
      options.onError?.(error instanceof Error ? error : new Error(String(error)));
    }
  };
  let queue: Promise<unknown> = Promise.resolve();
  let witnessing: Promise<unknown> = Promise.resolve();
  let established: Promise<void> | undefined;
  /** The last head this process verified the chain up to (signed, or verified at start). */
  let verified: AuditHead | undefined;
  /** No checkpoint may sign a head below this row: the report of an unvouched tail sits at it. */
  let floor = 0;
  let lastSigned: number | undefined;
  let refusal: CheckpointRefusal | undefined;
  let closed = false;
  /** Whether this process held the lease at its last claim. */
  let holding = false;
  /** Renews the lease while this process holds it, so a live holder's lease never lapses. */
  let renewal: ReturnType<typeof setInterval> | undefined;
  /** The renewal in flight, waited for before the lease is released at close. */
  let renewing: Promise<unknown> = Promise.resolve();
  /**
   * Rows an earlier process left unsigned, found while another instance held a live lease: that
   * holder may be alive and about to sign them, or have died within its lease. Judged by whether
   * the holder renews its lease (below); reported unless it lives, or a checkpoint covers them.
   */
  let pendingTail: PendingTail | undefined;
  /** Whether the inherited tail was reported or found signed: it is never reported twice. */
  let tailSettled = false;
  let judgement: ReturnType<typeof setTimeout> | undefined;
  /** When (monotonic ms) the pending tail's holder is judged. */
  let judgedAt = 0;
  const leaseTtl = options.lease?.ttlMs ?? defaultCheckpointLeaseMs;
  const unreachable = new Set<string>();

  const refuse = (rowId: number, reason: string): void => {
    if (refusal !== undefined) return;
    refusal = { rowId, reason };
    void report({
      kind: 'audit-checkpoint-refused',
      outcome: 'error',
      message: `The household admin signs no audit checkpoint: the chain does not verify from the previous checkpoint — ${reason}. Run npm run audit:verify, and keep this data folder as evidence.`,
      data: { rowId },
    });
  };

  /**
   * Re-walks the rows after `from` up to `to.rowId` and checks that the chain reaches `to.hash`
   * there; the first row that breaks, or `undefined`.
   */
  const verifySegment = async (from: AuditHead, to: AuditHead): Promise<CheckpointRefusal | undefined> => {
    if (to.rowId < from.rowId) {
      return {
        rowId: to.rowId + 1,
        reason: `rows ${to.rowId + 1} to ${from.rowId} are missing: the table ends at row ${to.rowId}, but row ${from.rowId} was signed (the last rows were deleted or rolled back)`,
      };
    }
    if (from.rowId > 0) {
      const [row] = await audit.rows(from.rowId - 1, 1);
      const verdict = checkAuditRow(row, { id: from.rowId, previousHash: row?.prevHash ?? '' });
      if (!verdict.ok) return verdict;
      if (verdict.hash !== from.hash) {
        return {
          rowId: from.rowId,
          reason: `row ${from.rowId}'s hash is not the one the household admin signed for it: the chain up to row ${from.rowId} was rewritten`,
        };
      }
    }
    let previous = from;
    while (previous.rowId < to.rowId) {
      const rows = await audit.rows(previous.rowId, Math.min(page, to.rowId - previous.rowId));
      if (rows.length === 0) return { rowId: previous.rowId + 1, reason: `row ${previous.rowId + 1} is missing` };
      for (const row of rows) {
        const verdict = checkAuditRow(row, { id: previous.rowId + 1, previousHash: previous.hash });
        if (!verdict.ok) return verdict;
        previous = { rowId: row.id, hash: verdict.hash };
      }
    }
    if (previous.hash !== to.hash) {
      return { rowId: to.rowId, reason: `row ${to.rowId} changed while it was being checkpointed` };
    }
    return undefined;
  };

  /** Where verification starts: the newest checkpoint the admin signed, in the store or at a witness. */
  const establish = async (): Promise<void> => {
    let from: AuditHead = { rowId: 0, hash: genesisHash };
    const anchors: Array<{ head: AuditHead; where: string }> = [];
    // 1. The newest stored checkpoint, verified against the admin's key: a forged or damaged last line is a refusal.
    const newest = await store.newest();
    if (newest !== undefined) {
      const verdict = await verifyCheckpoint(newest, 'the newest checkpoint in the checkpoint store');
      if (!verdict.ok) return refuse(verdict.rowId, verdict.reason);
      anchors.push({ head: verdict.checkpoint, where: 'the checkpoint store' });
      lastSigned = verdict.checkpoint.rowId;
    }
    // 2. What each witness holds: the household's disk cannot roll it back.
    for (const witness of witnesses) {
      let held: Awaited<ReturnType<Witness['latest']>>;
      try {
        held = await witness.latest(household.adminDid);
      } catch (error) {
        witnessUnreachable(witness, error);
        continue;
      }
      if (held === undefined) continue;
      const verdict = await verifyCheckpoint(held, `the checkpoint the witness ${witness.name} holds`);
      if (!verdict.ok) {
        // A record the admin did not sign vouches for nothing (and cannot stand in for one that was).
        void report({
          kind: 'audit-witness-refused',
          outcome: 'error',
          message: verdict.reason,
          data: { witness: witness.name },
        });
        continue;
      }
      anchors.push({ head: verdict.checkpoint, where: `the witness ${witness.name}` });
    }
    const head = await audit.head();
    // 3. Every anchor must be in the chain as signed; verification runs from the newest of them.
    for (const anchor of anchors) {
      if (anchor.head.rowId > head.rowId) {
        return refuse(
          head.rowId + 1,
          `rows ${head.rowId + 1} to ${anchor.head.rowId} are missing: the table ends at row ${head.rowId}, but ${anchor.where} holds a checkpoint at row ${anchor.head.rowId} signed by the household admin (the table was rolled back)`,
        );
      }
      const broken = await verifySegment(anchor.head, anchor.head);
      if (broken !== undefined) return refuse(broken.rowId, `${broken.reason} (checked against ${anchor.where})`);
      if (anchor.head.rowId > from.rowId) from = anchor.head;
    }
    const broken = await verifySegment(from, head);
    if (broken !== undefined) return refuse(broken.rowId, broken.reason);
    const earlier = await inherited;
    // 4. Rows an earlier process wrote and never signed: said so in the chain before anything is
    //    signed over them, unless a live lease holder will sign them (judged, below).
    if (!tailSettled && earlier.rowId > from.rowId) {
      const tail = { fromRow: from.rowId + 1, toRow: earlier.rowId, checkpointRow: from.rowId };
      const holder = await liveHolder();
      if (holder === undefined) await reportTail(tail);
      else deferTail(tail, holder);
    } else if (earlier.rowId <= from.rowId) {
      // Signed since (a checkpoint at or past them verified from the one before): nothing to say.
      settleTail();
    }
    verified = head;
  };

  /** Another instance's lease, unexpired on this clock; `undefined` when none, or this one's. */
  const liveHolder = async (): Promise<CheckpointLeaseHolder | undefined> => {
    const { lease } = options;
    if (lease === undefined) return undefined;
    try {
      const holder = await lease.store.holder();
      return holder !== undefined && holder.owner !== lease.owner && holder.expiresAt > now().getTime()
        ? holder
        : undefined;
    } catch (error) {
      // Unknown: the tail is reported, as if nobody held the lease (a false alarm, never a silence).
      options.onError?.(new Error('the audit checkpoint lease could not be read', { cause: error }));
      return undefined;
    }
  };

  const settleTail = (): void => {
    tailSettled = true;
    pendingTail = undefined;
    clearTimeout(judgement);
  };

  /** Says in the chain that nobody vouches for `tail`, and waits for it, so no later checkpoint leaves it out. */
  const reportTail = async (tail: UnsignedTail): Promise<void> => {
    settleTail();
    await report({
      kind: 'audit-tail-unvouched',
      outcome: 'error',
      message: `Rows ${tail.fromRow} to ${tail.toRow} were written after the last checkpoint (row ${tail.checkpointRow}) by a process that stopped without signing them: no checkpoint vouches for them, and they may have been rewritten while it was stopped.`,
      data: { fromRow: tail.fromRow, toRow: tail.toRow, checkpointRow: tail.checkpointRow },
    });
    // The report's row is in the chain now when the reporter waited for it: no head below it is signed.
    floor = Math.max(floor, tail.toRow + 1, (await audit.head().catch(() => ({ rowId: 0 }))).rowId);
  };

  /**
   * The tail's writer may be the live holder of the lease, which renews it every third of its
   * term and will sign the tail at its next checkpoint. So the judgement waits for one renewal:
   * at most two thirds of the term, or the lease's expiry if sooner.
   */
  const deferTail = (tail: UnsignedTail, seen: CheckpointLeaseHolder): void => {
    pendingTail = { ...tail, seen, judged: false };
    watchHolder(seen);
  };

  /** Judges the pending tail once `seen` should have been renewed (after `least` ms at least). */
  const watchHolder = (seen: CheckpointLeaseHolder, least = 0): void => {
    clearTimeout(judgement);
    if (closed) return;
    const wait = Math.max(least, Math.min((leaseTtl * 2) / 3, seen.expiresAt - now().getTime()));
    judgedAt = performance.now() + wait;
    judgement = setTimeout(() => void enqueue(judgeTail), wait);
    judgement.unref();
  };

  /**
   * The pending tail after a renewal period: signed by then (nothing to say), its holder alive
   * (it renewed; watched on, in case it dies before it signs), or its holder gone (it stopped
   * renewing, released the lease without signing the tail, or another instance took the lease
   * over): reported.
   */
  const judgeTail = async (): Promise<void> => {
    const tail = pendingTail;
    const { lease } = options;
    if (tail === undefined || lease === undefined || refusal !== undefined) return;
    try {
      const newest = await newestSigned();
      if (newest !== undefined && newest >= tail.toRow) return settleTail();
      const holder = await lease.store.holder();
      if (
        holder !== undefined &&
        holder.owner === tail.seen.owner &&
        holder.expiresAt > tail.seen.expiresAt &&
        holder.expiresAt > now().getTime()
      ) {
        pendingTail = { ...tail, seen: holder, judged: true };
        return watchHolder(holder);
      }
      const signedTo = Math.max(tail.checkpointRow, newest ?? 0);
      await reportTail({ fromRow: signedTo + 1, toRow: tail.toRow, checkpointRow: signedTo });
    } catch (error) {
      options.onError?.(new Error('the holder of the audit checkpoint lease could not be judged', { cause: error }));
      watchHolder(tail.seen, leaseTtl / 3);
    }
  };

  /** The row of the newest stored checkpoint, when the admin signed it. */
  const newestSigned = async (): Promise<number | undefined> => {
    const newest = await store.newest();
    if (newest === undefined) return undefined;
    const verdict = await verifyCheckpoint(newest, 'the newest checkpoint in the checkpoint store');
    return verdict.ok ? verdict.checkpoint.rowId : undefined;
  };

  const witnessUnreachable = (witness: Witness, error: unknown): void => {
    options.onError?.(new Error(`the audit witness ${witness.name} could not be reached`, { cause: error }));
    if (unreachable.has(witness.name)) return;
    unreachable.add(witness.name);
    void report({
      kind: 'audit-witness-unreachable',
      outcome: 'error',
      message: `The audit witness ${witness.name} could not be reached: checkpoints are kept on this disk only until it answers (${error instanceof Error ? error.message : String(error)}).`,
      data: { witness: witness.name },
    });
  };

  const witness = (checkpoint: AuditCheckpoint): void => {
    const submission = { householdDid: household.adminDid, ...checkpoint };
    witnessing = witnessing.then(async () => {
      for (const each of witnesses) {
        try {
          const receipt = await each.submit(submission);
          unreachable.delete(each.name);
          if (!receipt.accepted) {
            void report({
              kind: 'audit-witness-refused',
              outcome: 'deny',
              message: `The audit witness ${each.name} refused the checkpoint at row ${checkpoint.rowId}: ${receipt.reason}.`,
              data: { witness: each.name, rowId: checkpoint.rowId },
            });
          }
        } catch (error) {
          witnessUnreachable(each, error);
        }
      }
    });
  };

  /** Takes or renews the lease; whether this process holds it now. */
  const claim = async (lease: NonNullable<AuditCheckpointsOptions['lease']>): Promise<boolean> => {
    holding = await lease.store.claim({ owner: lease.owner, now: now().getTime(), ttlMs: leaseTtl });
    if (holding && renewal === undefined && !closed) {
      // While it lives, the holder's lease never lapses: one that does is one whose holder stopped.
      renewal = setInterval(
        () => {
          renewing = claim(lease).catch((error: unknown) => {
            options.onError?.(new Error('the audit checkpoint lease could not be renewed', { cause: error }));
          });
        },
        lease.renewMs ?? leaseTtl / 3,
      );
      renewal.unref();
    }
    if (!holding) stopRenewal();
    return holding;
  };

  const stopRenewal = (): void => {
    clearInterval(renewal);
    renewal = undefined;
  };

  /**
   * Whether this process may sign now: always without a lease; with one, when it took or renewed
   * it. When another instance signed since this one last did, what this process verified is stale:
   * it is dropped, so the caller verifies again from the newest stored checkpoint before it signs.
   * So is it while an inherited tail waits on another holder's judgement: that holder let the
   * lease go, so the tail is judged now, before anything is signed over it.
   */
  const maySign = async (): Promise<boolean> => {
    const { lease } = options;
    if (lease === undefined) return true;
    try {
      if (!(await claim(lease))) return false;
      const newest: unknown = await store.newest();
      const newestRow =
        typeof newest === 'object' && newest !== null && 'rowId' in newest
          ? (newest as { rowId: unknown }).rowId
          : undefined;
      if (newestRow !== lastSigned || pendingTail !== undefined) established = undefined;
      return true;
    } catch (error) {
      holding = false;
      stopRenewal();
      options.onError?.(new Error('the audit checkpoint lease could not be taken', { cause: error }));
      return false;
    }
  };

  const sign = async (requested: AuditHead): Promise<AuditCheckpoint | undefined> => {
    // Every instance verifies the chain from the newest checkpoint at its first request (its start),
    // and says what it found, whether or not it holds the lease; only the holder signs.
    const establishOnce = async () => {
      established ??= establish().catch((error: unknown) => {
        refuse(
          0,
          `the previous checkpoint could not be read (${error instanceof Error ? error.message : String(error)})`,
        );
      });
      await established;
    };
    await establishOnce();
    if (refusal !== undefined) return undefined;
    if (!(await maySign())) return undefined;
    // Another instance signed since: verify again from its newest checkpoint.
    await establishOnce();
    if (refusal !== undefined || verified === undefined) return undefined;
    // A head inside an unvouched tail is never signed: the checkpoint covers the report of it too.
    const head = requested.rowId < floor ? await audit.head() : requested;
    if (head.rowId === lastSigned) return undefined;
    if (head.rowId > verified.rowId) {
      const broken = await verifySegment(verified, head);
      if (broken !== undefined) {
        refuse(broken.rowId, broken.reason);
        return undefined;
      }
    }
    try {
      const credential = await household.issue({
        signer: 'admin',
        type: 'AuditCheckpoint',
        subject: household.adminDid,
        claims: { rowId: head.rowId, hash: head.hash } satisfies AuditCheckpointClaims,
        now: now(),
      });
      const checkpoint: AuditCheckpoint = { rowId: head.rowId, hash: head.hash, credential };
      await store.append(checkpoint);
      lastSigned = head.rowId;
      if (head.rowId > verified.rowId) verified = head;
      witness(checkpoint);
      return checkpoint;
    } catch (error) {
      options.onError?.(new Error(`audit checkpoint at row ${head.rowId} not written`, { cause: error }));
      return undefined;
    }
  };

  /** Runs `work` after every checkpoint and judgement asked for before it. */
  const enqueue = <T>(work: () => Promise<T>): Promise<T> => {
    const next = queue.then(work);
    queue = next.catch(() => undefined);
    return next;
  };

  const request = (at?: AuditHead): Promise<AuditCheckpoint | undefined> => {
    // The head at the moment of the request (or the row that asked for it): later rows wait for the next checkpoint.
    const head = at === undefined ? audit.head() : Promise.resolve(at);
    return enqueue(async () => {
      let requested: AuditHead;
      try {
        requested = await head;
      } catch (error) {
        options.onError?.(new Error('the audit head could not be read for a checkpoint', { cause: error }));
        return undefined;
      }
      return sign(requested);
    });
  };

  const unsubscribe = audit.subscribe((entry) => {
    if (entry.id % every === 0) void request({ rowId: entry.id, hash: entry.hash });
  });

  return {
    checkpoint: () => (closed ? queue.then(() => undefined) : request()),
    refused: () => refusal,
    async close() {
      if (!closed) {
        closed = true;
        unsubscribe();
        // A tail whose holder was not judged yet is judged first, at the end of its renewal period:
        // closing must neither report a live holder's rows nor leave a dead one's unsaid.
        const unjudged = pendingTail !== undefined && !pendingTail.judged;
        clearTimeout(judgement);
        if (unjudged) {
          await new Promise((resolve) => setTimeout(resolve, Math.max(0, judgedAt - performance.now())));
          await enqueue(judgeTail);
        }
        clearTimeout(judgement);
        await request();
      }
      await queue;
      stopRenewal();
      await renewing;
      const { lease } = options;
      if (lease !== undefined && holding) {
        holding = false;
        await lease.store.release(lease.owner).catch((error: unknown) => {
          options.onError?.(new Error('the audit checkpoint lease could not be released', { cause: error }));
        });
      }
      await witnessing;
    },
  };
}
