import Database from 'better-sqlite3';
import { z } from 'zod';
import type { AuditLog } from './audit-log';
import { checkAuditRow, type StoredAuditRow } from './check-audit-row';
import { type CheckpointStore, createFileCheckpointStore } from './checkpoint-store';
import { genesisHash } from './hash-audit-row';
import { createCheckpointVerifier, type VerifiedCheckpoint } from './verify-checkpoint';
import type { Witness } from './witness';

export type { VerifiedCheckpoint } from './verify-checkpoint';

/** What {@link verifyAuditChain} checks, and against which key. */
export interface VerifyAuditChainOptions {
  /** The household SQLite file; opened read-only. Ignored when `audit` is given. */
  readonly databasePath?: string;
  /** The chain through its log (PostgreSQL, or any handle), read page by page: instead of `databasePath`. */
  readonly audit?: Pick<AuditLog, 'rows'>;
  /** The checkpoints file (`audit-checkpoints.jsonl`); a missing file holds no checkpoint. Ignored when `checkpoints` is given. */
  readonly checkpointsPath?: string;
  /** The checkpoint store, when it is not the file at `checkpointsPath`. */
  readonly checkpoints?: CheckpointStore;
  /** The household admin's DID: the only issuer whose checkpoints count. */
  readonly adminDid: string;
  /** The admin's pinned public key (Ed25519 JWK). */
  readonly adminJwk: Readonly<Record<string, string>>;
  /** Witnesses to check the chain against (SPEC §8): a rollback of table and checkpoints together is caught here. */
  readonly witnesses?: readonly Witness[];
  /** When the checkpoints' signatures are checked; default now. */
  readonly now?: Date;
}

/** The newest checkpoint a witness holds, which the chain matched. */
export interface WitnessVouch {
  readonly witness: string;
  /** The last row the witness vouches for. */
  readonly rowId: number;
  readonly signedAt: Date;
}

/** The verdict: every row checked, or the first row that breaks, in plain words. */
export type AuditChainVerdict =
  | {
      readonly ok: true;
      readonly rows: number;
      readonly checkpoint?: VerifiedCheckpoint;
      /** One per witness asked, when any was. */
      readonly witnessed?: readonly WitnessVouch[];
    }
  | { readonly ok: false; readonly rowId: number; readonly reason: string };

/** The structured part of the runtime's `audit-tail-unvouched` event: which rows nobody signed. */
const Unvouched = z.object({
  fromRow: z.number().int().min(1),
  toRow: z.number().int().min(1),
  checkpointRow: z.number().int().min(0),
});

/**
 * Re-walks the household's audit chain from row 1 (SPEC §8) and checks it against the admin-signed
 * checkpoints: ids consecutive from 1 (a deleted row), each event in canonical form, each
 * `prev_hash` equal to the previous row's hash (reordered or removed rows), each `hash` equal to
 * the SHA-256 of the row's canonical bytes (an edited row); then every checkpoint's signature
 * against the pinned admin key, that the chain's row at each checkpoint has exactly the signed hash
 * (an edit with every later hash recomputed) and that no checkpointed row is missing (a deleted
 * tail). With witnesses, the newest checkpoint each holds must be in the chain with its signed hash:
 * a table rolled back together with its checkpoints is caught there, and the verdict names the last
 * row the witness vouches for. Rows the chain itself records as unvouched (written after the last
 * checkpoint by a process that stopped without signing them) fail too: nothing vouches for them.
 * Names the first row that breaks. The chain may run past the newest checkpoint: those rows are
 * covered by the next one.
 */
export async function verifyAuditChain(options: VerifyAuditChainOptions): Promise<AuditChainVerdict> {
  const now = options.now ?? new Date();
  const verifyCheckpoint = createCheckpointVerifier({
    adminDid: options.adminDid,
    adminJwk: options.adminJwk,
    now: () => now,
  });
  // 1. The checkpoints: every entry signed by the admin, its plain fields equal to what is signed.
  const store = options.checkpoints ?? createFileCheckpointStore(options.checkpointsPath ?? '');
  const signed = new Map<number, VerifiedCheckpoint>();
  for (const [index, entry] of (await store.entries()).entries()) {
    const verdict = await verifyCheckpoint(entry, `the checkpoint on line ${index + 1} of the checkpoints file`);
    if (!verdict.ok) return verdict;
    const existing = signed.get(verdict.checkpoint.rowId);
    if (existing !== undefined && existing.hash !== verdict.checkpoint.hash) {
      return broken(
        verdict.checkpoint.rowId,
        `two checkpoints signed by the admin disagree on row ${verdict.checkpoint.rowId}`,
      );
    }
    signed.set(verdict.checkpoint.rowId, verdict.checkpoint);
  }
  const newest = [...signed.values()].reduce<VerifiedCheckpoint | undefined>(
    (latest, checkpoint) => (latest === undefined || checkpoint.rowId > latest.rowId ? checkpoint : latest),
    undefined,
  );

  // 2. What each witness holds, verified against the admin key too: the witness's word counts for nothing.
  const held: Array<{ witness: string; checkpoint: VerifiedCheckpoint }> = [];
  for (const witness of options.witnesses ?? []) {
    let latest: Awaited<ReturnType<Witness['latest']>>;
    try {
      latest = await witness.latest(options.adminDid);
    } catch (error) {
      return broken(
        0,
        `the witness ${witness.name} could not be asked: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    if (latest === undefined) {
      return broken(0, `the witness ${witness.name} holds no checkpoint of ${options.adminDid}: it vouches for no row`);
    }
    const verdict = await verifyCheckpoint(latest, `the checkpoint the witness ${witness.name} holds`);
    if (!verdict.ok) return verdict;
    held.push({ witness: witness.name, checkpoint: verdict.checkpoint });
  }

  const database =
    options.audit === undefined
      ? new Database(options.databasePath ?? '', { readonly: true, fileMustExist: true })
      : undefined;
  try {
    const table = database
      ?.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'audit_log'")
      .get() as { name: string } | undefined;
    if (database !== undefined && table === undefined) {
      return broken(1, 'the database has no audit table (audit_log): it was dropped');
    }

    // The empty chain's checkpoint must carry the genesis value.
    const genesis = signed.get(0);
    if (genesis !== undefined && genesis.hash !== genesisHash) {
      return broken(0, 'the checkpoint of the empty chain (row 0) does not carry the genesis value');
    }

    // 3. The chain, row by row, in id order.
    const hashesAt = new Map<number, string>(held.map((entry) => [entry.checkpoint.rowId, '']));
    const unvouched: Array<{ atRow: number; fromRow: number; toRow: number; checkpointRow: number }> = [];
    let expectedId = 1;
    let previousHash = genesisHash;
    const rows =
      database === undefined
        ? pages(options.audit as Pick<AuditLog, 'rows'>)
        : database.prepare('SELECT id, event, prev_hash AS prevHash, hash FROM audit_log ORDER BY id').iterate();
    for await (const raw of rows) {
      const row = checkAuditRow(raw, { id: expectedId, previousHash });
      if (!row.ok) return row;
      const id = expectedId;
      // 3a. A checkpoint at this row: the admin signed exactly this hash.
      const checkpoint = signed.get(id);
      if (checkpoint !== undefined && checkpoint.hash !== row.hash) {
        return broken(
          id,
          `row ${id}'s hash is not the one the household admin signed in the checkpoint of ${checkpoint.signedAt.toISOString()}: the chain up to row ${id} was rewritten`,
        );
      }
      if (hashesAt.has(id)) hashesAt.set(id, row.hash);
      // 3b. The runtime's own record of rows nobody signed.
      if (row.event.source === 'runtime' && row.event.kind === 'audit-tail-unvouched') {
        const range = Unvouched.safeParse(row.event.data);
        if (range.success) unvouched.push({ atRow: id, ...range.data });
      }
      previousHash = row.hash;
      expectedId = id + 1;
    }
    const count = expectedId - 1;

    // 4. Nothing the admin signed may be missing: a checkpoint beyond the table's end is a deleted tail.
    if (newest !== undefined && newest.rowId > count) {
      return broken(
        count + 1,
        `rows ${count + 1} to ${newest.rowId} are missing: the table ends at row ${count}, but the household admin signed a checkpoint at row ${newest.rowId} (the last rows were deleted)`,
      );
    }
    // 5. Rows with no signed checkpoint at all: the checkpoints file was removed or never written.
    if (count > 0 && newest === undefined) {
      return broken(
        1,
        'no checkpoint signed by the household admin covers the chain: the checkpoints file is missing or empty',
      );
    }
    // 6. Each witness's newest checkpoint is in the chain, with the hash the admin signed: else a rollback.
    const witnessed: WitnessVouch[] = [];
    for (const { witness, checkpoint } of held) {
      const vouches = `the witness ${witness} vouches for rows 1 to ${checkpoint.rowId} (the admin's checkpoint of ${checkpoint.signedAt.toISOString()})`;
      if (checkpoint.rowId > count) {
        const local = newest === undefined ? 'no checkpoint' : `its newest checkpoint is at row ${newest.rowId}`;
        return broken(
          count + 1,
          `the chain was rolled back: ${vouches}, but the table ends at row ${count} and ${local}; rows ${count + 1} to ${checkpoint.rowId} were removed together with their checkpoints. The last row the witness vouches for is row ${checkpoint.rowId}`,
        );
      }
      if (checkpoint.rowId > 0 && hashesAt.get(checkpoint.rowId) !== checkpoint.hash) {
        return broken(
          checkpoint.rowId,
          `row ${checkpoint.rowId}'s hash is not the one the witness ${witness} holds: the chain up to row ${checkpoint.rowId} was rewritten. The last row the witness vouches for is row ${checkpoint.rowId}`,
        );
      }
      witnessed.push({ witness, rowId: checkpoint.rowId, signedAt: checkpoint.signedAt });
    }
    // 7. Rows the chain records as unvouched: consistent or not, no signer saw them before they could be rewritten.
    const [gap] = unvouched;
    if (gap !== undefined) {
      return broken(
        gap.fromRow,
        `rows ${gap.fromRow} to ${gap.toRow} are not vouched for: they were written after the checkpoint at row ${gap.checkpointRow} by a process that stopped without signing them, so they may have been rewritten before the next start (row ${gap.atRow} records this)`,
      );
    }
    const verdict =
      newest === undefined
        ? { ok: true as const, rows: count }
        : { ok: true as const, rows: count, checkpoint: newest };
    return options.witnesses === undefined ? verdict : { ...verdict, witnessed };
  } finally {
    database?.close();
  }
}

/** Every stored row of the log, in id order, a page at a time. */
async function* pages(audit: Pick<AuditLog, 'rows'>): AsyncGenerator<StoredAuditRow> {
  let last = 0;
  for (;;) {
    const rows = await audit.rows(last, 1000);
    for (const row of rows) {
      yield row;
      last = row.id;
    }
    if (rows.length < 1000) return;
  }
}

function broken(rowId: number, reason: string): { ok: false; rowId: number; reason: string } {
  return { ok: false, rowId, reason };
}
