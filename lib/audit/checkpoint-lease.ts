import type Database from 'better-sqlite3';
import type { Migration } from '../apply-migrations';

/** Who asks for the checkpoint lease, at what time, for how long. */
export interface CheckpointLeaseRequest {
  /** The instance asking: a fresh id per process. */
  readonly owner: string;
  /** Milliseconds since the epoch, on the asker's clock. */
  readonly now: number;
  readonly ttlMs: number;
}

/** Who holds the checkpoint lease, and until when (milliseconds since the epoch, on the holder's clock). */
export interface CheckpointLeaseHolder {
  readonly owner: string;
  readonly expiresAt: number;
}

/**
 * The household's one checkpoint lease (docs/scale-out.md "One audit chain, several writers"):
 * checkpoints of the shared chain are signed by whichever instance holds it, so every instance
 * hears every row but one signs each checkpoint period. The lease orders signers; it proves
 * nothing. What a verifier trusts is still the admin's signature, and the witness outside the
 * database.
 */
export interface CheckpointLeaseStore {
  /**
   * Takes or extends the lease for `owner` until `now + ttlMs` when it is free, expired, or the
   * owner's already, in one conditional write; `true` when the owner holds it now.
   */
  claim(request: CheckpointLeaseRequest): Promise<boolean>;
  /** Ends the owner's lease (at close), so the next instance signs at once; another owner's is left alone. */
  release(owner: string): Promise<void>;
  /**
   * The lease as it stands, expired or not; `undefined` when nobody took it or its holder released
   * it. A holder renews it while it lives, so a lease that stops moving is one whose holder stopped.
   */
  holder(): Promise<CheckpointLeaseHolder | undefined>;
}

/** The lease's one row on SQLite (module `checkpoint-lease` in `lib/store.ts`). Append to change. */
export const checkpointLeaseMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE audit_checkpoint_lease (
      name TEXT PRIMARY KEY CHECK (name = 'signer'),
      owner TEXT NOT NULL CHECK (length(owner) > 0),
      expires_at INTEGER NOT NULL
    ) STRICT;`,
  },
];

/**
 * The checkpoint lease on the household SQLite file: a claim is one upsert whose update applies
 * only over a free, expired or own row, and `RETURNING` says whether it did.
 */
export function createSqliteCheckpointLeaseStore(database: Database.Database): CheckpointLeaseStore {
  const claim = database.prepare(
    `INSERT INTO audit_checkpoint_lease (name, owner, expires_at) VALUES ('signer', @owner, @expiresAt)
     ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
       WHERE audit_checkpoint_lease.owner = excluded.owner OR audit_checkpoint_lease.expires_at <= @now
     RETURNING owner`,
  );
  const release = database.prepare(`DELETE FROM audit_checkpoint_lease WHERE name = 'signer' AND owner = ?`);
  const holder = database.prepare<[], CheckpointLeaseHolder>(
    `SELECT owner, expires_at AS expiresAt FROM audit_checkpoint_lease WHERE name = 'signer'`,
  );
  return {
    async claim({ owner, now, ttlMs }) {
      return claim.get({ owner, now, expiresAt: now + ttlMs }) !== undefined;
    },
    async release(owner) {
      release.run(owner);
    },
    async holder() {
      return holder.get();
    },
  };
}

/** The checkpoint lease in this process's memory: for one instance alone, and tests. */
export function createMemoryCheckpointLeaseStore(): CheckpointLeaseStore {
  let held: { owner: string; expiresAt: number } | undefined;
  return {
    async claim({ owner, now, ttlMs }) {
      if (held !== undefined && held.owner !== owner && held.expiresAt > now) return false;
      held = { owner, expiresAt: now + ttlMs };
      return true;
    },
    async release(owner) {
      if (held?.owner === owner) held = undefined;
    },
    async holder() {
      return held;
    },
  };
}
