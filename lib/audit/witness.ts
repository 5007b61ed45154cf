import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { AuditError } from './audit-error';
import { appendLine } from './checkpoint-store';
import { parseJson } from './parse-json';

/** A checkpoint as a witness receives and holds it: whose it is, the head, and the admin-signed credential. */
export interface WitnessSubmission {
  /** The household admin's DID: the witness keeps the latest checkpoint per household DID. */
  readonly householdDid: string;
  readonly rowId: number;
  readonly hash: string;
  /** The admin-signed `AuditCheckpoint` JWT-VC; a verifier trusts only this, never the witness's word. */
  readonly credential: string;
}

/** What a witness holds for a household: the submission, and the witness's own signature over it when it has a key. */
export interface WitnessedCheckpoint extends WitnessSubmission {
  /** The witness's countersignature (a JWT-VC by its key) that it held this checkpoint; absent for a file. */
  readonly countersignature?: string;
}

/** A witness's answer to a submission: countersigned (or recorded, for a witness without a key), or refused in words. */
export type WitnessReceipt =
  | { readonly accepted: true; readonly countersignature?: string }
  | { readonly accepted: false; readonly reason: string };

/**
 * Somewhere the household's own disk does not hold, that keeps its signed checkpoints (SPEC §8):
 * `submit` hands one over (the witness checks it, keeps it, and countersigns it when it has a key;
 * it refuses one that goes backwards), `latest` returns the newest it holds for a household DID.
 * A rollback of the audit table and the checkpoints file together is detected against it. Faults
 * (unreachable, a damaged answer) reject with an {@link AuditError}; refusals are values.
 */
export interface Witness {
  /** How people and messages name it: `shop`, `file /path/to/witness.jsonl`. */
  readonly name: string;
  submit(checkpoint: WitnessSubmission): Promise<WitnessReceipt>;
  latest(householdDid: string): Promise<WitnessedCheckpoint | undefined>;
  close(): Promise<void>;
}

const Submission = z.object({
  householdDid: z.string().min(1).max(2000),
  rowId: z.number().int().min(0),
  hash: z.string().regex(/^[0-9a-f]{64}$/),
  credential: z.string().min(1).max(16_384),
});

/**
 * An operator-configured append-only file as a witness: one JSON line per checkpoint it is given,
 * synced before `submit` resolves, never rewritten. It has no key, so it countersigns nothing: what
 * it protects against depends on where the operator puts it (another disk, an append-only mount, a
 * log shipper), which is the point of configuring it. It refuses a checkpoint that goes backwards or
 * forks a row it holds, so a rolled-back household cannot overwrite what it recorded.
 */
export function createFileWitness(path: string): Witness {
  const name = `file ${path}`;
  const read = async (): Promise<readonly WitnessSubmission[]> => {
    let text = '';
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new AuditError('witness-unreachable', `the witness file ${path} cannot be read`, { cause: error });
    }
    const lines = text.split('\n');
    if (lines.at(-1) === '') lines.pop();
    return lines.map((line, index) => {
      const parsed = Submission.safeParse(parseJson(line));
      // A damaged witness fails closed: what it holds can no longer be read with confidence.
      if (!parsed.success)
        throw new AuditError('witness-damaged', `line ${index + 1} of the witness file ${path} is not a checkpoint`);
      return parsed.data;
    });
  };
  const latest = async (householdDid: string): Promise<WitnessSubmission | undefined> =>
    (await read()).filter((entry) => entry.householdDid === householdDid).at(-1);
  let queue: Promise<unknown> = Promise.resolve();
  return {
    name,
    submit(checkpoint) {
      // One submission at a time, so two cannot both pass the backwards check.
      const done = queue.then(async (): Promise<WitnessReceipt> => {
        const entry = Submission.parse(checkpoint);
        const held = await latest(entry.householdDid);
        const refusal = held === undefined ? undefined : backwards(held, entry);
        if (refusal !== undefined) return { accepted: false, reason: refusal };
        if (held?.rowId === entry.rowId) return { accepted: true };
        appendLine(path, `${JSON.stringify(entry)}\n`);
        return { accepted: true };
      });
      queue = done.catch(() => undefined);
      return done;
    },
    latest,
    async close() {
      await queue;
    },
  };
}

/**
 * Why a witness holding `held` refuses `next`, in words, or `undefined` when `next` is the same
 * checkpoint or a later one: a witness only ever moves forward for a household.
 */
export function backwards(held: WitnessSubmission, next: WitnessSubmission): string | undefined {
  if (next.rowId < held.rowId) {
    return `the witness already holds a checkpoint at row ${held.rowId} for ${held.householdDid}: a checkpoint at row ${next.rowId} goes backwards (was the audit table rolled back?)`;
  }
  if (next.rowId === held.rowId && next.hash !== held.hash) {
    return `the witness holds another hash for row ${held.rowId} of ${held.householdDid}: the chain up to row ${held.rowId} was rewritten`;
  }
  return undefined;
}
