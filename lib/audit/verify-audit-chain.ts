import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { z } from 'zod';
import { createCredentialVerifier, householdKeys } from '../../identity/index';
import { HouseholdEvent } from '../events';
import { canonicalJson, genesisHash, hashAuditRow } from './hash-audit-row';
import { parseJson } from './parse-json';

/** What {@link verifyAuditChain} checks, and against which key. */
export interface VerifyAuditChainOptions {
  /** The household SQLite file; opened read-only. */
  readonly databasePath: string;
  /** The checkpoints file (`audit-checkpoints.jsonl`); a missing file holds no checkpoint. */
  readonly checkpointsPath: string;
  /** The household admin's DID: the only issuer whose checkpoints count. */
  readonly adminDid: string;
  /** The admin's pinned public key (Ed25519 JWK). */
  readonly adminJwk: Readonly<Record<string, string>>;
  /** When the checkpoints' signatures are checked; default now. */
  readonly now?: Date;
}

/** The newest checkpoint the chain was checked against. */
export interface VerifiedCheckpoint {
  readonly rowId: number;
  readonly hash: string;
  readonly signedBy: string;
  readonly signedAt: Date;
}

/** The verdict: every row checked, or the first row that breaks, in plain words. */
export type AuditChainVerdict =
  | { readonly ok: true; readonly rows: number; readonly checkpoint?: VerifiedCheckpoint }
  | { readonly ok: false; readonly rowId: number; readonly reason: string };

const Row = z.object({ id: z.number().int(), event: z.string(), prev_hash: z.string(), hash: z.string() });
const Line = z.object({ rowId: z.number(), hash: z.string(), credential: z.string() });
const Claims = z.object({ rowId: z.number().int().min(0), hash: z.string().regex(/^[0-9a-f]{64}$/) });

/**
 * Re-walks the household's audit chain from row 1 (SPEC §8) and checks it against the admin-signed
 * checkpoints: ids consecutive from 1 (a deleted row), each event in canonical form, each
 * `prev_hash` equal to the previous row's hash (reordered or removed rows), each `hash` equal to
 * the SHA-256 of the row's canonical bytes (an edited row); then every checkpoint's signature
 * against the pinned admin key, that the chain's row at each checkpoint has exactly the signed hash
 * (an edit with every later hash recomputed) and that no checkpointed row is missing (a deleted
 * tail). Names the first row that breaks. The chain may run past the newest checkpoint: those rows
 * are covered by the next one.
 */
export async function verifyAuditChain(options: VerifyAuditChainOptions): Promise<AuditChainVerdict> {
  // 1. The checkpoints: every line signed by the admin, its plain fields equal to what is signed.
  const checkpoints = await readCheckpoints(options);
  if (!checkpoints.ok) return checkpoints;
  const signed = checkpoints.byRow;
  const newest = [...signed.values()].reduce<VerifiedCheckpoint | undefined>(
    (latest, checkpoint) => (latest === undefined || checkpoint.rowId > latest.rowId ? checkpoint : latest),
    undefined,
  );

  const database = new Database(options.databasePath, { readonly: true, fileMustExist: true });
  try {
    const table = database
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'audit_log'")
      .get() as { name: string } | undefined;
    if (table === undefined) return broken(1, 'the database has no audit table (audit_log): it was dropped');

    // The empty chain's checkpoint must carry the genesis value.
    const genesis = signed.get(0);
    if (genesis !== undefined && genesis.hash !== genesisHash) {
      return broken(0, 'the checkpoint of the empty chain (row 0) does not carry the genesis value');
    }

    // 2. The chain, row by row, in id order.
    let expectedId = 1;
    let previousHash = genesisHash;
    const rows = database.prepare('SELECT id, event, prev_hash, hash FROM audit_log ORDER BY id').iterate();
    for (const raw of rows) {
      const row = Row.safeParse(raw);
      if (!row.success) return broken(expectedId, `row ${expectedId} is not an audit row (its columns were altered)`);
      const { id, event: text, prev_hash: prevHash, hash } = row.data;
      // 2a. Ids run 1, 2, 3, … without a gap: a gap is a deleted row.
      if (id !== expectedId) {
        return broken(
          expectedId,
          id > expectedId
            ? `row ${expectedId} is missing: the next row is ${id} (rows were deleted)`
            : `row ${id} appears where row ${expectedId} should be (ids were altered)`,
        );
      }
      // 2b. The stored bytes are a household event in canonical form.
      const event = parseJson(text);
      if (event === undefined) return broken(id, `row ${id}'s event is not JSON (it was edited)`);
      if (!HouseholdEvent.safeParse(event).success) {
        return broken(id, `row ${id}'s event is not a household event (it was edited)`);
      }
      if (canonicalJson(event) !== text) {
        return broken(id, `row ${id}'s event is not in canonical form (it was edited)`);
      }
      // 2c. The link: this row names the previous row's hash.
      if (prevHash !== previousHash) {
        return broken(
          id,
          id === 1
            ? 'row 1 does not start the chain: its prev_hash is not the genesis value'
            : `row ${id} does not follow row ${id - 1}: its prev_hash is not row ${id - 1}'s hash (rows were reordered, removed or rewritten)`,
        );
      }
      // 2d. The row's own bytes hash to what it records.
      if (hashAuditRow({ id, prevHash, event }) !== hash) {
        return broken(id, `row ${id}'s contents do not match its hash (the row was edited)`);
      }
      // 2e. A checkpoint at this row: the admin signed exactly this hash.
      const checkpoint = signed.get(id);
      if (checkpoint !== undefined && checkpoint.hash !== hash) {
        return broken(
          id,
          `row ${id}'s hash is not the one the household admin signed in the checkpoint of ${checkpoint.signedAt.toISOString()}: the chain up to row ${id} was rewritten`,
        );
      }
      previousHash = hash;
      expectedId = id + 1;
    }
    const count = expectedId - 1;

    // 3. Nothing the admin signed may be missing: a checkpoint beyond the table's end is a deleted tail.
    if (newest !== undefined && newest.rowId > count) {
      return broken(
        count + 1,
        `rows ${count + 1} to ${newest.rowId} are missing: the table ends at row ${count}, but the household admin signed a checkpoint at row ${newest.rowId} (the last rows were deleted)`,
      );
    }
    // 4. Rows with no signed checkpoint at all: the checkpoints file was removed or never written.
    if (count > 0 && newest === undefined) {
      return broken(
        1,
        'no checkpoint signed by the household admin covers the chain: the checkpoints file is missing or empty',
      );
    }
    return newest === undefined ? { ok: true, rows: count } : { ok: true, rows: count, checkpoint: newest };
  } finally {
    database.close();
  }
}

/** Reads and verifies every checkpoint line; the verified ones by row. */
async function readCheckpoints(
  options: VerifyAuditChainOptions,
): Promise<{ ok: true; byRow: Map<number, VerifiedCheckpoint> } | { ok: false; rowId: number; reason: string }> {
  let text = '';
  try {
    text = readFileSync(options.checkpointsPath, 'utf8');
  } catch (error) {
    // No file: no checkpoint; an empty chain needs none, a non-empty one is refused by the caller.
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const verify = createCredentialVerifier(householdKeys({ adminDid: options.adminDid, adminJwk: options.adminJwk }));
  const now = options.now ?? new Date();
  const byRow = new Map<number, VerifiedCheckpoint>();
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  for (const [index, content] of lines.entries()) {
    const where = `the checkpoint on line ${index + 1} of the checkpoints file`;
    const line = Line.safeParse(parseJson(content));
    if (!line.success) return broken(0, `${where} is not a checkpoint (the file was damaged or edited)`);
    const claimed = Number.isSafeInteger(line.data.rowId) && line.data.rowId >= 0 ? line.data.rowId : 0;
    // The signature and the claim layout, against the pinned admin key only.
    const verdict = await verify(line.data.credential, { type: 'AuditCheckpoint', issuer: options.adminDid, now });
    if (!verdict.verified) {
      return broken(claimed, `${where} is not signed by the household admin ${options.adminDid}: ${verdict.reason}`);
    }
    const claims = Claims.safeParse(verdict.credential.subject);
    if (!claims.success || verdict.credential.sub !== options.adminDid) {
      return broken(claimed, `${where} is signed by the admin but does not name a chain head of this household`);
    }
    // Only the signed claims count; plain fields that disagree mean the line was edited.
    if (claims.data.rowId !== line.data.rowId || claims.data.hash !== line.data.hash) {
      return broken(claimed, `${where} says row ${line.data.rowId}, but its signature covers row ${claims.data.rowId}`);
    }
    const existing = byRow.get(claims.data.rowId);
    if (existing !== undefined && existing.hash !== claims.data.hash) {
      return broken(claims.data.rowId, `two checkpoints signed by the admin disagree on row ${claims.data.rowId}`);
    }
    byRow.set(claims.data.rowId, {
      rowId: claims.data.rowId,
      hash: claims.data.hash,
      signedBy: verdict.credential.iss,
      signedAt: new Date(verdict.credential.iat * 1000),
    });
  }
  return { ok: true, byRow };
}

function broken(rowId: number, reason: string): { ok: false; rowId: number; reason: string } {
  return { ok: false, rowId, reason };
}
