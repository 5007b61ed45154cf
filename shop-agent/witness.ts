import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { compactVerify } from 'jose';
import { z } from 'zod';
import type { MerchantKey } from './key-store.js';
import type { ShopOutcome } from './shop.js';
import { ShopError } from './shop-error.js';
import { signCredential } from './sign-credential.js';
import { checkTimeClaims } from './time-claims.js';

/**
 * The shop as a witness of a household's audit checkpoints (SPEC §8, issue 26): the household
 * hands over each checkpoint its admin signed; the shop checks the admin's signature, keeps the
 * newest few per household, countersigns with the merchant key, and answers with the latest it holds.
 * It never moves backwards for a household, so a household whose disk was rolled back cannot make the
 * shop forget what it saw. This is operator business between two organisations: the tools are served
 * on their own MCP endpoint, never beside the shop's model-facing tools.
 */
export interface CheckpointWitness {
  /** Verifies, keeps and countersigns one checkpoint; refuses one that goes backwards or is not signed by the household's pinned admin key. */
  submit(input: WitnessSubmitInput): Promise<ShopOutcome<{ countersignature: string }>>;
  /** The newest checkpoint held for a household DID, with its countersignature; `null` when none. */
  latest(householdDid: string): ShopOutcome<{ checkpoint: HeldCheckpoint | null }>;
  /** How many checkpoints are held for a household (tests: storage is bounded). */
  count(householdDid: string): number;
  close(): void;
}

/** A checkpoint the witness holds: what it received, and what it signed. */
export type HeldCheckpoint = {
  householdDid: string;
  rowId: number;
  hash: string;
  credential: string;
  countersignature: string;
};

/** Ed25519 public JWK (the household admin's), as the witness pins it on first contact. */
const PublicJwk = z.strictObject({
  kty: z.literal('OKP'),
  crv: z.literal('Ed25519'),
  x: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
});

/** The input of `witness_submit`: one checkpoint and the admin key it is signed with. */
export const WitnessSubmitInput = z.strictObject({
  checkpoint: z.strictObject({
    householdDid: z.string().min(1).max(500),
    rowId: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    hash: z.string().regex(/^[0-9a-f]{64}$/),
    credential: z.string().min(1).max(8192),
  }),
  adminJwk: PublicJwk,
});

/** One `witness_submit` request. */
export type WitnessSubmitInput = z.infer<typeof WitnessSubmitInput>;

/** Storage bounds: what keeps one household (or many) from filling the shop's disk. */
export type WitnessLimits = {
  /** Checkpoints kept per household: the newest ones; older ones are dropped. Default 8. */
  perHousehold: number;
  /** Households the shop witnesses at most; a new one beyond is refused. Default 100. */
  households: number;
};

/** Default {@link WitnessLimits}. */
export const DEFAULT_WITNESS_LIMITS: WitnessLimits = { perHousehold: 8, households: 100 };

/** The countersignature's lifetime: as long as the checkpoint's own (ten years). */
const COUNTERSIGNATURE_TTL_SECONDS = 10 * 365 * 24 * 60 * 60;

const CheckpointClaims = z.object({
  iss: z.string(),
  sub: z.string(),
  vc: z.object({
    type: z.array(z.string()).refine((types) => types.includes('AuditCheckpoint'), 'not an AuditCheckpoint'),
    credentialSubject: z.object({ rowId: z.number().int().min(0), hash: z.string() }),
  }),
});

const Held = z.object({
  household_did: z.string(),
  row_id: z.number().int(),
  hash: z.string(),
  credential: z.string(),
  countersignature: z.string(),
});

/**
 * Opens the witness on the shop's own SQLite file (`<shop data>/witness.sqlite`). It keeps per
 * household only what detection needs: the pinned admin key, and the newest few checkpoints (row,
 * hash, the admin's credential so anyone can re-verify it, the countersignature); no audit row,
 * no order, nothing else of the household's.
 */
export function openCheckpointWitness(options: {
  readonly path: string;
  readonly key: MerchantKey;
  readonly limits?: Partial<WitnessLimits>;
  readonly now?: () => Date;
}): CheckpointWitness {
  const limits = { ...DEFAULT_WITNESS_LIMITS, ...options.limits };
  const now = options.now ?? (() => new Date());
  let db: Database.Database;
  try {
    db = new Database(options.path);
    db.pragma('journal_mode = WAL');
    db.pragma('busy_timeout = 5000');
    db.exec(`CREATE TABLE IF NOT EXISTS witness_households (
      did TEXT PRIMARY KEY,
      admin_jwk TEXT NOT NULL,
      pinned_at INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS witness_checkpoints (
      household_did TEXT NOT NULL REFERENCES witness_households (did),
      row_id INTEGER NOT NULL,
      hash TEXT NOT NULL,
      credential TEXT NOT NULL,
      countersignature TEXT NOT NULL,
      received_at INTEGER NOT NULL,
      PRIMARY KEY (household_did, row_id)
    ) STRICT;`);
  } catch (error) {
    throw new ShopError('witness-store', `cannot open the witness store at ${options.path}`, { cause: error });
  }
  const householdKey = db.prepare<[string], { admin_jwk: string }>(
    'SELECT admin_jwk FROM witness_households WHERE did = ?',
  );
  const householdCount = db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM witness_households');
  const pin = db.prepare('INSERT INTO witness_households (did, admin_jwk, pinned_at) VALUES (?, ?, ?)');
  const newest = db.prepare<[string], unknown>(
    'SELECT household_did, row_id, hash, credential, countersignature FROM witness_checkpoints WHERE household_did = ? ORDER BY row_id DESC LIMIT 1',
  );
  const insert = db.prepare(
    'INSERT INTO witness_checkpoints (household_did, row_id, hash, credential, countersignature, received_at) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const prune = db.prepare(
    'DELETE FROM witness_checkpoints WHERE household_did = ? AND row_id NOT IN (SELECT row_id FROM witness_checkpoints WHERE household_did = ? ORDER BY row_id DESC LIMIT ?)',
  );
  const countFor = db.prepare<[string], { n: number }>(
    'SELECT COUNT(*) AS n FROM witness_checkpoints WHERE household_did = ?',
  );
  const latestOf = (did: string): HeldCheckpoint | null => {
    const row = newest.get(did);
    if (row === undefined) return null;
    const held = Held.parse(row);
    return {
      householdDid: held.household_did,
      rowId: held.row_id,
      hash: held.hash,
      credential: held.credential,
      countersignature: held.countersignature,
    };
  };
  // The check against what is held and the write are one transaction: two submissions cannot both pass.
  const keep = db.transaction(
    (entry: HeldCheckpoint, adminJwk: string, at: number): ShopOutcome<{ countersignature: string }> => {
      const pinned = householdKey.get(entry.householdDid);
      if (pinned === undefined) {
        if ((householdCount.get()?.n ?? 0) >= limits.households) {
          return { ok: false, reason: `the witness already serves ${limits.households} households and takes no more` };
        }
        pin.run(entry.householdDid, adminJwk, at);
      } else if (pinned.admin_jwk !== adminJwk) {
        return { ok: false, reason: `the witness pinned another admin key for ${entry.householdDid}` };
      }
      const held = latestOf(entry.householdDid);
      if (held !== null) {
        if (entry.rowId < held.rowId) {
          return {
            ok: false,
            reason: `the witness already holds a checkpoint at row ${held.rowId} for ${entry.householdDid}: a checkpoint at row ${entry.rowId} goes backwards (was the audit table rolled back?)`,
          };
        }
        if (entry.rowId === held.rowId) {
          if (entry.hash !== held.hash) {
            return {
              ok: false,
              reason: `the witness holds another hash for row ${held.rowId} of ${entry.householdDid}: the chain up to row ${held.rowId} was rewritten`,
            };
          }
          return { ok: true, value: { countersignature: held.countersignature } };
        }
      }
      insert.run(entry.householdDid, entry.rowId, entry.hash, entry.credential, entry.countersignature, at);
      prune.run(entry.householdDid, entry.householdDid, limits.perHousehold);
      return { ok: true, value: { countersignature: entry.countersignature } };
    },
  );

  return {
    async submit(input) {
      const { checkpoint, adminJwk } = input;
      // Step 1: the admin key pinned for this household on first contact (trust on first use,
      // per DID), or the key given now for a new household.
      const pinned = householdKey.get(checkpoint.householdDid);
      const jwk = pinned === undefined ? adminJwk : PublicJwk.parse(JSON.parse(pinned.admin_jwk));
      if (pinned !== undefined && pinned.admin_jwk !== JSON.stringify(adminJwk)) {
        return { ok: false, reason: `the witness pinned another admin key for ${checkpoint.householdDid}` };
      }
      // Step 2: the credential's signature verifies with that key; claims come only from the signed bytes.
      let payload: unknown;
      try {
        const verified = await compactVerify(
          checkpoint.credential,
          { ...jwk, alg: 'EdDSA' },
          { algorithms: ['EdDSA', 'Ed25519'] },
        );
        payload = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(verified.payload));
      } catch {
        return { ok: false, reason: `the checkpoint is not signed by the admin key of ${checkpoint.householdDid}` };
      }
      // Step 3: an AuditCheckpoint the household's admin issued about its own chain, exactly the head given.
      const claims = CheckpointClaims.safeParse(payload);
      if (
        !claims.success ||
        claims.data.iss !== checkpoint.householdDid ||
        claims.data.sub !== checkpoint.householdDid
      ) {
        return { ok: false, reason: 'the credential is not an AuditCheckpoint of this household' };
      }
      const subject = claims.data.vc.credentialSubject;
      if (subject.rowId !== checkpoint.rowId || subject.hash !== checkpoint.hash) {
        return {
          ok: false,
          reason: `the checkpoint says row ${checkpoint.rowId}, but its signature covers row ${subject.rowId}`,
        };
      }
      // Step 4: its time claims are bounded like every credential the shop accepts.
      const window = checkTimeClaims(payload as Record<string, unknown>, {
        now: now(),
        maxLifetimeSeconds: COUNTERSIGNATURE_TTL_SECONDS,
      });
      if (!window.ok) return { ok: false, reason: `the checkpoint is not acceptable: ${window.reason}` };
      // Step 5: countersign (the merchant key says it held this checkpoint at this time), then keep it.
      const countersigned = await signCredential(options.key, {
        type: 'AuditCheckpointWitnessed',
        subject: {
          householdDid: checkpoint.householdDid,
          rowId: checkpoint.rowId,
          hash: checkpoint.hash,
          checkpointHash: createHash('sha256').update(checkpoint.credential, 'ascii').digest('base64url'),
        },
        ttlSeconds: COUNTERSIGNATURE_TTL_SECONDS,
        now: now(),
      });
      return keep(
        { ...checkpoint, countersignature: countersigned.jws },
        JSON.stringify(adminJwk),
        Math.floor(now().getTime() / 1000),
      );
    },
    latest(householdDid) {
      return { ok: true, value: { checkpoint: latestOf(householdDid) } };
    },
    count: (householdDid) => countFor.get(householdDid)?.n ?? 0,
    close() {
      db.close();
    },
  };
}
