import type Database from 'better-sqlite3';
import { z } from 'zod';
import type { Migration } from '../apply-migrations';

/**
 * Where a turn taken over by another instance picks up (docs/scale-out.md, turn leases): the order
 * whose household approval the turn was waiting for. Everything else the continuation needs (the
 * invoice, its total, the merchant, the decision) is read from the approval request in the store.
 */
export const ResumePoint = z.strictObject({ kind: z.literal('order'), approvalId: z.string().min(1).max(200) });

/** Where a taken-over turn picks up. */
export type ResumePoint = z.infer<typeof ResumePoint>;

/** One session's turn lease as the store holds it. */
export interface TurnLease {
  readonly sessionId: string;
  /** The instance running the turn. */
  readonly owner: string;
  /** Milliseconds since the epoch, on the owner's clock; at or after it, any instance may take the turn. */
  readonly expiresAt: number;
  /** Set while the turn waits on something a successor can finish without the model. */
  readonly resume?: ResumePoint;
}

/** Who asks, for which session, at what time, for how long. */
export interface LeaseRequest {
  readonly sessionId: string;
  readonly owner: string;
  readonly now: number;
  readonly ttlMs: number;
}

/**
 * Chat turns owned through leases in the household's store (SPEC §11, §10.10), so a turn whose
 * instance died is finished by another. The lease gives liveness only: what keeps money right
 * when two instances briefly both act is the charge's own once-only evidence and payment row.
 */
export interface TurnLeaseStore {
  /**
   * Takes the session's lease for `owner` until `now + ttlMs` when it is free, expired, or the
   * owner's already, in one conditional write. Returns the lease now held (with the resume point
   * a dead owner left), or `undefined` when another owner's lease is live.
   */
  claim(request: LeaseRequest): Promise<TurnLease | undefined>;
  /** Extends the owner's lease; false when another instance took it over (the turn must stop). */
  renew(request: LeaseRequest): Promise<boolean>;
  /** Records (or with `null` clears) where a successor resumes; false when the owner lost the lease. */
  mark(request: {
    readonly sessionId: string;
    readonly owner: string;
    readonly resume: ResumePoint | null;
  }): Promise<boolean>;
  /** Ends the owner's lease; another owner's is left alone. */
  release(sessionId: string, owner: string): Promise<void>;
  /** Up to `limit` leases expired by `now` that left a resume point: turns whose instance died mid-order. */
  orphans(now: number, limit: number): Promise<readonly TurnLease[]>;
}

/** The lease table on SQLite (module `turn-leases` in `lib/store.ts`). Append to change. */
export const turnLeaseMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE turn_leases (
      session_id TEXT PRIMARY KEY,
      owner TEXT NOT NULL CHECK (length(owner) > 0),
      expires_at INTEGER NOT NULL,
      resume TEXT
    ) STRICT;
    CREATE INDEX turn_leases_orphans ON turn_leases (expires_at) WHERE resume IS NOT NULL;`,
  },
];

const Row = z.object({
  session_id: z.string(),
  owner: z.string(),
  expires_at: z.coerce.number(),
  resume: z.string().nullable(),
});

/** A stored row as a lease; a resume point that no longer parses is dropped (nothing to resume). */
export function leaseOfRow(row: unknown): TurnLease {
  const parsed = Row.parse(row);
  const lease = { sessionId: parsed.session_id, owner: parsed.owner, expiresAt: parsed.expires_at };
  if (parsed.resume === null) return lease;
  const resume = ResumePoint.safeParse(safeJson(parsed.resume));
  return resume.success ? { ...lease, resume: resume.data } : lease;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The turn leases on the household SQLite file; each operation is one statement. */
export function createSqliteTurnLeaseStore(database: Database.Database): TurnLeaseStore {
  // Free, expired or already ours: the one upsert decides, and RETURNING says whether it did.
  const claim = database.prepare(
    `INSERT INTO turn_leases (session_id, owner, expires_at) VALUES (@sessionId, @owner, @expiresAt)
     ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
       WHERE turn_leases.owner = excluded.owner OR turn_leases.expires_at <= @now
     RETURNING session_id, owner, expires_at, resume`,
  );
  const renew = database.prepare(
    'UPDATE turn_leases SET expires_at = @expiresAt WHERE session_id = @sessionId AND owner = @owner',
  );
  const mark = database.prepare(
    'UPDATE turn_leases SET resume = @resume WHERE session_id = @sessionId AND owner = @owner',
  );
  const release = database.prepare('DELETE FROM turn_leases WHERE session_id = ? AND owner = ?');
  const orphans = database.prepare(
    `SELECT session_id, owner, expires_at, resume FROM turn_leases
     WHERE resume IS NOT NULL AND expires_at <= ? ORDER BY expires_at LIMIT ?`,
  );
  return {
    async claim({ sessionId, owner, now, ttlMs }) {
      const row = claim.get({ sessionId, owner, now, expiresAt: now + ttlMs });
      return row === undefined ? undefined : leaseOfRow(row);
    },
    async renew({ sessionId, owner, now, ttlMs }) {
      return renew.run({ sessionId, owner, expiresAt: now + ttlMs }).changes === 1;
    },
    async mark({ sessionId, owner, resume }) {
      return mark.run({ sessionId, owner, resume: resume === null ? null : JSON.stringify(resume) }).changes === 1;
    },
    async release(sessionId, owner) {
      release.run(sessionId, owner);
    },
    async orphans(now, limit) {
      return orphans.all(now, limit).map(leaseOfRow);
    },
  };
}

/** The turn leases in this process's memory: the chat service's default, for one instance alone. */
export function createMemoryTurnLeaseStore(): TurnLeaseStore {
  const leases = new Map<string, TurnLease>();
  return {
    async claim({ sessionId, owner, now, ttlMs }) {
      const held = leases.get(sessionId);
      if (held !== undefined && held.owner !== owner && held.expiresAt > now) return undefined;
      const lease = { ...held, sessionId, owner, expiresAt: now + ttlMs };
      leases.set(sessionId, lease);
      return lease;
    },
    async renew({ sessionId, owner, now, ttlMs }) {
      const held = leases.get(sessionId);
      if (held?.owner !== owner) return false;
      leases.set(sessionId, { ...held, expiresAt: now + ttlMs });
      return true;
    },
    async mark({ sessionId, owner, resume }) {
      const held = leases.get(sessionId);
      if (held?.owner !== owner) return false;
      const { resume: _dropped, ...rest } = held;
      leases.set(sessionId, resume === null ? rest : { ...rest, resume });
      return true;
    },
    async release(sessionId, owner) {
      if (leases.get(sessionId)?.owner === owner) leases.delete(sessionId);
    },
    async orphans(now, limit) {
      return [...leases.values()]
        .filter((lease) => lease.resume !== undefined && lease.expiresAt <= now)
        .sort((a, b) => a.expiresAt - b.expiresAt)
        .slice(0, limit);
    },
  };
}
