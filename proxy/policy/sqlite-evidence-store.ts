import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { ProxyError } from '../errors';
import type { EvidenceId, EvidenceStore, ReserveResult } from './evidence-store';

/** Options for {@link openSqliteEvidenceStore}. */
export interface SqliteEvidenceStoreOptions {
  /** Database file (`:memory:` only for tests; durability needs a file). */
  readonly path: string;
  /** Most live entries kept; a reservation beyond it is refused, never evicting a spent id. */
  readonly capacity: number;
  /**
   * How long a reservation may stay uncommitted before it is treated as abandoned (a crash between
   * reserve and commit happens before the policy allowed, so nothing was executed). Default 60 s.
   */
  readonly leaseMs?: number;
}

/**
 * The embedded SQLite evidence store (WAL). Reserve runs in a `BEGIN IMMEDIATE` transaction, which
 * takes the write lock first, so two processes sharing the file cannot both reserve one id.
 */
export function openSqliteEvidenceStore(options: SqliteEvidenceStoreOptions): EvidenceStore {
  const leaseMs = options.leaseMs ?? 60_000;
  let database: Database.Database;
  try {
    database = new Database(options.path);
    database.pragma('journal_mode = WAL');
    database.pragma('busy_timeout = 5000');
    database.exec(`CREATE TABLE IF NOT EXISTS spent_evidence (
      id TEXT PRIMARY KEY,
      expires_at INTEGER NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('reserved', 'spent')),
      reservation TEXT,
      lease_until INTEGER
    ) STRICT`);
  } catch (error) {
    throw new ProxyError('store-failed', `cannot open evidence store ${options.path}`, { cause: error });
  }
  const purge = database.prepare(
    `DELETE FROM spent_evidence WHERE expires_at <= @now OR (state = 'reserved' AND lease_until <= @now)`,
  );
  const count = database.prepare('SELECT COUNT(*) AS n FROM spent_evidence');
  const insert = database.prepare(
    `INSERT INTO spent_evidence (id, expires_at, state, reservation, lease_until)
     VALUES (@id, @expiresAt, 'reserved', @reservation, @leaseUntil) ON CONFLICT (id) DO NOTHING`,
  );
  const commit = database.prepare(
    `UPDATE spent_evidence SET state = 'spent', lease_until = NULL WHERE reservation = ? AND state = 'reserved'`,
  );
  const release = database.prepare(`DELETE FROM spent_evidence WHERE reservation = ? AND state = 'reserved'`);
  const lookup = database.prepare(
    `SELECT 1 FROM spent_evidence WHERE id = @id AND expires_at > @now AND (state = 'spent' OR lease_until > @now)`,
  );

  const reserveTransaction = database.transaction((ids: readonly EvidenceId[], now: number): ReserveResult => {
    // 1. Forget what has expired with its evidence, and abandoned reservations.
    purge.run({ now });
    // 2. Capacity: refuse rather than evict (evicting a spent id would let it be replayed).
    const live = (count.get() as { n: number }).n;
    if (live + ids.length > options.capacity) return { ok: false, reason: 'full' };
    // 3. Insert every id or none: a conflict on any id rolls the whole reservation back.
    const reservation = randomUUID();
    for (const evidence of ids) {
      const result = insert.run({
        id: evidence.id,
        expiresAt: evidence.expiresAt,
        reservation,
        leaseUntil: now + leaseMs,
      });
      if (result.changes !== 1) throw new SpentConflict(evidence.id);
    }
    return { ok: true, reservation };
  });

  return {
    async reserve(ids, now) {
      try {
        return reserveTransaction.immediate(ids, now);
      } catch (error) {
        if (error instanceof SpentConflict) return { ok: false, reason: 'spent', id: error.id };
        throw new ProxyError('store-failed', 'evidence store reserve failed', { cause: error });
      }
    },
    async commit(reservation) {
      if (commit.run(reservation).changes === 0) {
        throw new ProxyError('store-failed', 'reservation expired before commit');
      }
    },
    async release(reservation) {
      release.run(reservation);
    },
    async isSpent(id, now) {
      return lookup.get({ id, now }) !== undefined;
    },
    async close() {
      database.close();
    },
  };
}

/** Thrown inside the transaction to roll it back when an id is already held. */
class SpentConflict extends Error {
  constructor(readonly id: string) {
    super(`evidence ${id} already used`);
  }
}
