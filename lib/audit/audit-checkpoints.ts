import { chmodSync, closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import type { AuditCheckpointClaims, Household } from '../../identity/index';
import type { AuditHead, AuditLog } from './audit-log';

/** File name of the checkpoints inside the data folder: outside the audited table, append-only, 0600. */
export const auditCheckpointsFileName = 'audit-checkpoints.jsonl';

/** Rows between two checkpoints when no other number is configured. */
export const defaultCheckpointEvery = 100;

/** One line of the checkpoints file: the head in plain words for people, and the admin-signed JWT-VC. */
export interface AuditCheckpoint extends AuditCheckpointClaims {
  /** The `AuditCheckpoint` JWT-VC over `{rowId, hash}`: the only part a verifier trusts. */
  readonly credential: string;
}

/** Options of {@link createAuditCheckpoints}. */
export interface AuditCheckpointsOptions {
  readonly audit: AuditLog;
  /** Signs with the admin key (SPEC §5.1). */
  readonly household: Pick<Household, 'adminDid' | 'issue'>;
  /** The checkpoints file, normally `<data folder>/audit-checkpoints.jsonl`. */
  readonly path: string;
  /** A checkpoint whenever this process appends a row whose id is a multiple of it; default 100. */
  readonly every?: number;
  /** When a checkpoint is signed (`iat`); default the system clock. */
  readonly now?: () => Date;
  /** A checkpoint that could not be signed or written. The audit rows are unaffected. */
  readonly onError?: (error: Error) => void;
}

/** Signs the chain's head into the checkpoints file (SPEC §8). */
export interface AuditCheckpoints {
  /**
   * Signs the head as it is at this call, after every earlier checkpoint is written. Resolves with
   * the checkpoint, or `undefined` when this head is already signed or signing failed; never rejects.
   */
  checkpoint(): Promise<AuditCheckpoint | undefined>;
  /** Stops the every-N checkpoints, signs the head, and waits until every checkpoint is written. */
  close(): Promise<void>;
}

/**
 * Keeps signed checkpoints of the audit chain outside the audited table: every `every` rows and at
 * close the household admin signs `{rowId, hash}` of the head as an `AuditCheckpoint` credential,
 * so a verifier detects a deleted tail or a chain recomputed after an edit. Signing is async and
 * never delays `append`: the head is read when the checkpoint is requested, signed later, and the
 * lines are written in request order. A failed checkpoint is reported and loses no event.
 */
export function createAuditCheckpoints(options: AuditCheckpointsOptions): AuditCheckpoints {
  const every = options.every ?? defaultCheckpointEvery;
  if (!Number.isSafeInteger(every) || every < 1) throw new RangeError('checkpoint interval must be a positive integer');
  const now = options.now ?? (() => new Date());
  let queue: Promise<unknown> = Promise.resolve();
  let lastSigned: number | undefined;
  let closed = false;

  const sign = async (head: AuditHead): Promise<AuditCheckpoint | undefined> => {
    if (head.rowId === lastSigned) return undefined;
    try {
      const credential = await options.household.issue({
        signer: 'admin',
        type: 'AuditCheckpoint',
        subject: options.household.adminDid,
        claims: { rowId: head.rowId, hash: head.hash } satisfies AuditCheckpointClaims,
        now: now(),
      });
      const checkpoint: AuditCheckpoint = { rowId: head.rowId, hash: head.hash, credential };
      appendLine(options.path, `${JSON.stringify(checkpoint)}\n`);
      lastSigned = head.rowId;
      return checkpoint;
    } catch (error) {
      options.onError?.(
        new Error(`audit checkpoint at row ${head.rowId} not written`, {
          cause: error,
        }),
      );
      return undefined;
    }
  };

  const request = (): Promise<AuditCheckpoint | undefined> => {
    // The head at the moment of the request: later rows wait for the next checkpoint.
    const head = options.audit.head();
    const written = queue.then(() => sign(head));
    queue = written;
    return written;
  };

  const unsubscribe = options.audit.subscribe((entry) => {
    if (entry.id % every === 0) void request();
  });

  return {
    checkpoint: () => (closed ? queue.then(() => undefined) : request()),
    async close() {
      if (closed) {
        await queue;
        return;
      }
      closed = true;
      unsubscribe();
      await request();
    },
  };
}

/** Appends one line and syncs it to disk; the file is created owner-only and kept so. */
function appendLine(path: string, line: string): void {
  const descriptor = openSync(path, 'a', 0o600);
  try {
    chmodSync(path, 0o600);
    const bytes = Buffer.from(line, 'utf8');
    let written = 0;
    while (written < bytes.length) written += writeSync(descriptor, bytes, written, bytes.length - written);
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
}
