import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { ProxyError } from '../errors';
import { type Migration, openSqliteFile, prepareStatements } from '../store/apply-migrations';
import {
  DEFAULT_EVIDENCE_LEASE_MS,
  type EvidenceId,
  type EvidenceState,
  type EvidenceStore,
  type HeldEvidence,
  type ReserveResult,
} from './evidence-store';

/** One schema step of the evidence table: the same shape as the household store's migrations. */
export type EvidenceStoreMigration = Migration;

/**
 * The evidence table's migrations (SPEC §4.7, §11), oldest first, for a host that keeps the table
 * in its own database (the household's one SQLite file registers them under a module name of its
 * choosing, e.g. `evidence`). {@link openSqliteEvidenceStore} applies them itself. Append a new
 * version to change the table; never edit one that has shipped.
 */
export const evidenceStoreMigrations: readonly EvidenceStoreMigration[] = [
  {
    // The table as first shipped; IF NOT EXISTS so a file created before migrations were recorded is adopted.
    version: 1,
    sql: `CREATE TABLE IF NOT EXISTS spent_evidence (
      id TEXT PRIMARY KEY,
      expires_at INTEGER NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('reserved', 'spent')),
      reservation TEXT,
      lease_until INTEGER
    ) STRICT;`,
  },
  {
    // Settlement (single-use through dispatch): the `in-doubt` state, the call's fingerprint and
    // the result a retry replays. SQLite cannot widen a CHECK in place, so the table is rebuilt
    // and every existing row (reserved or spent) carried over unchanged.
    version: 2,
    sql: `CREATE TABLE spent_evidence_v2 (
      id TEXT PRIMARY KEY,
      expires_at INTEGER NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('reserved', 'in-doubt', 'spent')),
      reservation TEXT,
      lease_until INTEGER,
      fingerprint TEXT,
      result TEXT
    ) STRICT;
    INSERT INTO spent_evidence_v2 (id, expires_at, state, reservation, lease_until)
      SELECT id, expires_at, state, reservation, lease_until FROM spent_evidence;
    DROP TABLE spent_evidence;
    ALTER TABLE spent_evidence_v2 RENAME TO spent_evidence;
    CREATE INDEX spent_evidence_by_reservation ON spent_evidence (reservation);`,
  },
];

/** The module name {@link openSqliteEvidenceStore} records its migrations under in `schema_migrations`. */
const migrationModule = 'evidence';

/** Options for {@link createSqliteEvidenceStore}. */
export interface SqliteEvidenceStoreSettings {
  /** Most live entries kept; a reservation beyond it is refused, never evicting a held id. */
  readonly capacity: number;
  /**
   * How long a reservation may stay uncommitted before it is treated as abandoned (a crash between
   * reserve and commit happens before the policy allowed, so nothing was executed). Default 60 s.
   * An in-doubt entry is never freed by time; its sender's lease is the sender's to set.
   */
  readonly leaseMs?: number;
}

/** Options for {@link openSqliteEvidenceStore}. */
export interface SqliteEvidenceStoreOptions extends SqliteEvidenceStoreSettings {
  /** Database file (`:memory:` only for tests; durability needs a file). */
  readonly path: string;
}

/**
 * Opens (creating or upgrading) a SQLite file of its own as the evidence store (WAL, busy
 * timeout, {@link evidenceStoreMigrations} applied). `close()` closes the file.
 */
export function openSqliteEvidenceStore(options: SqliteEvidenceStoreOptions): EvidenceStore {
  let opened: Database.Database;
  try {
    opened = openSqliteFile(options.path, { [migrationModule]: evidenceStoreMigrations });
  } catch (error) {
    throw new ProxyError('store-failed', `cannot open evidence store ${options.path}`, { cause: error });
  }
  const store = createSqliteEvidenceStore(opened, options);
  return {
    ...store,
    async close() {
      opened.close();
    },
  };
}

/**
 * The evidence store on an existing better-sqlite3 handle whose owner has applied
 * {@link evidenceStoreMigrations} (the household store). Every check-and-hold runs in a
 * `BEGIN IMMEDIATE` transaction, which takes the write lock first, so two processes sharing the
 * file cannot both reserve one id. `close()` leaves the handle to its owner.
 */
export function createSqliteEvidenceStore(
  database: Database.Database,
  settings: SqliteEvidenceStoreSettings,
): EvidenceStore {
  const leaseMs = settings.leaseMs ?? DEFAULT_EVIDENCE_LEASE_MS;
  const statements = prepareStatements(database, prepare, 'evidenceStoreMigrations');
  const { purge, count, live, insert, markInDoubt, commit, release } = statements;
  const liveEntry = (id: string, now: number): HeldEvidence | undefined => {
    const row = live.get({ id, now });
    return row === undefined ? undefined : heldFromRow(row);
  };

  const reserveTransaction = database.transaction(
    (ids: readonly EvidenceId[], now: number, fingerprint: string | null): ReserveResult => {
      // 1. Forget what has expired with its evidence, and abandoned reservations (never an in-doubt entry).
      purge.run({ now });
      // 2. Any id already held refuses the whole call, with what holds it, read under the same lock.
      const held = ids.flatMap((evidence) => liveEntry(evidence.id, now) ?? []);
      const first = held[0];
      if (first) return { ok: false, reason: 'spent', id: first.id, held };
      // 3. Capacity: refuse rather than evict (evicting a held id would let it be replayed).
      const { n } = count.get() as { n: number };
      if (n + ids.length > settings.capacity) return { ok: false, reason: 'full' };
      // 4. Insert every id or none: an id named twice in one call rolls the whole reservation back.
      const reservation = randomUUID();
      for (const evidence of ids) {
        const result = insert.run({
          id: evidence.id,
          expiresAt: evidence.expiresAt,
          reservation,
          leaseUntil: now + leaseMs,
          fingerprint,
        });
        if (result.changes !== 1) throw new SpentConflict(evidence.id);
      }
      return { ok: true, reservation };
    },
  );
  const lookupTransaction = database.transaction((ids: readonly string[], now: number) =>
    ids.flatMap((id) => liveEntry(id, now) ?? []),
  );

  return {
    async reserve(ids, now, options) {
      try {
        return reserveTransaction.immediate(ids, now, options?.fingerprint ?? null);
      } catch (error) {
        if (error instanceof SpentConflict) return { ok: false, reason: 'spent', id: error.id, held: [] };
        throw new ProxyError('store-failed', 'evidence store reserve failed', { cause: error });
      }
    },
    async markInDoubt(reservation, options) {
      if (markInDoubt.run({ reservation, sendingUntil: options?.sendingUntil ?? null }).changes === 0) {
        throw new ProxyError('store-failed', 'reservation expired before the call was sent');
      }
    },
    async commit(reservation, options) {
      if (commit.run({ reservation, result: options?.result ?? null }).changes === 0) {
        throw new ProxyError('store-failed', 'reservation expired before commit');
      }
    },
    async release(reservation) {
      release.run(reservation);
    },
    async lookup(ids, now) {
      return lookupTransaction(ids, now);
    },
    async isSpent(id, now) {
      return liveEntry(id, now) !== undefined;
    },
    async close() {
      // The handle belongs to whoever opened it.
    },
  };
}

/** Every statement of the store: the one place that knows the table's SQL besides its migrations. */
function prepare(database: Database.Database) {
  return {
    // In-doubt entries are never purged: a call that may have run is resolved by settlement, not by time.
    purge: database.prepare(
      `DELETE FROM spent_evidence WHERE state <> 'in-doubt'
         AND (expires_at <= @now OR (state = 'reserved' AND lease_until <= @now))`,
    ),
    count: database.prepare('SELECT COUNT(*) AS n FROM spent_evidence'),
    live: database.prepare<{ id: string; now: number }, EvidenceRow>(
      `SELECT id, state, reservation, fingerprint, result, lease_until FROM spent_evidence
       WHERE id = @id AND (state = 'in-doubt' OR (expires_at > @now AND (state = 'spent' OR lease_until > @now)))`,
    ),
    insert: database.prepare(
      `INSERT INTO spent_evidence (id, expires_at, state, reservation, lease_until, fingerprint)
       VALUES (@id, @expiresAt, 'reserved', @reservation, @leaseUntil, @fingerprint) ON CONFLICT (id) DO NOTHING`,
    ),
    // In doubt, `lease_until` is the sender's lease: it never makes the entry purgeable.
    markInDoubt: database.prepare(
      `UPDATE spent_evidence SET state = 'in-doubt', lease_until = @sendingUntil
       WHERE reservation = @reservation AND state IN ('reserved', 'in-doubt')`,
    ),
    commit: database.prepare(
      `UPDATE spent_evidence SET state = 'spent', lease_until = NULL, result = @result
       WHERE reservation = @reservation AND state IN ('reserved', 'in-doubt')`,
    ),
    release: database.prepare(`DELETE FROM spent_evidence WHERE reservation = ? AND state IN ('reserved', 'in-doubt')`),
  };
}

interface EvidenceRow {
  readonly id: string;
  readonly state: EvidenceState;
  readonly reservation: string | null;
  readonly fingerprint: string | null;
  readonly result: string | null;
  readonly lease_until: number | null;
}

function heldFromRow(row: EvidenceRow): HeldEvidence {
  return {
    id: row.id,
    state: row.state,
    ...(row.reservation !== null && { reservation: row.reservation }),
    ...(row.fingerprint !== null && { fingerprint: row.fingerprint }),
    ...(row.result !== null && { result: row.result }),
    ...(row.state === 'in-doubt' && row.lease_until !== null && { sendingUntil: row.lease_until }),
  };
}

/** Thrown inside the transaction to roll it back when an id is named twice in one call. */
class SpentConflict extends Error {
  constructor(readonly id: string) {
    super(`evidence ${id} already used`);
  }
}
