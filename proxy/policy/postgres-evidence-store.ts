import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { ProxyError } from '../errors';
import type { Migration } from '../store/apply-migrations';
import { inTransaction } from '../store/apply-postgres-migrations';
import { openPostgresPool } from '../store/open-postgres-pool';
import {
  DEFAULT_EVIDENCE_LEASE_MS,
  type EvidenceId,
  type EvidenceState,
  type EvidenceStore,
  type HeldEvidence,
  type ReserveResult,
} from './evidence-store';

/**
 * The evidence table on PostgreSQL (SPEC §4.7, §11), registered as module `evidence` like SQLite's,
 * with SQLite's columns plus `reservation_size`: how many ids the reservation took, so settling it
 * can tell that one of its ids was taken over after its lease lapsed. Times are milliseconds since
 * the epoch. Append to change; never edit a shipped one.
 */
export const postgresEvidenceStoreMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE spent_evidence (
      id TEXT PRIMARY KEY,
      expires_at BIGINT NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('reserved', 'in-doubt', 'spent')),
      reservation TEXT NOT NULL,
      reservation_size INTEGER NOT NULL CHECK (reservation_size >= 1),
      lease_until BIGINT,
      fingerprint TEXT,
      result TEXT,
      CHECK ((state = 'reserved') = (lease_until IS NOT NULL))
    );
    CREATE INDEX spent_evidence_by_reservation ON spent_evidence (reservation);
    CREATE INDEX spent_evidence_by_expiry ON spent_evidence (expires_at);`,
  },
  {
    // In doubt, `lease_until` is the sender's lease (`sendingUntil`): a reserved row still needs
    // one, a spent row has none, an in-doubt row may have either.
    version: 2,
    sql: `ALTER TABLE spent_evidence DROP CONSTRAINT spent_evidence_check;
    ALTER TABLE spent_evidence ADD CONSTRAINT spent_evidence_lease CHECK (
      CASE state WHEN 'reserved' THEN lease_until IS NOT NULL WHEN 'spent' THEN lease_until IS NULL ELSE true END
    );`,
  },
];

/** Options of {@link createPostgresEvidenceStore}. */
export interface PostgresEvidenceStoreSettings {
  /** Most live entries kept; a reservation beyond it is refused, never evicting a held id. */
  readonly capacity: number;
  /** How long a reservation may stay unsettled before it is treated as abandoned (default 60 s, as SQLite). */
  readonly leaseMs?: number;
}

/** Options of {@link openPostgresEvidenceStore}. */
export interface PostgresEvidenceStoreOptions extends PostgresEvidenceStoreSettings {
  /** `postgres://…`; every instance on one database shares the evidence. */
  readonly url: string;
}

/** Opens the evidence store on a PostgreSQL database, with {@link postgresEvidenceStoreMigrations} applied; `close()` ends its pool. */
export async function openPostgresEvidenceStore(options: PostgresEvidenceStoreOptions): Promise<EvidenceStore> {
  const pool = await openPostgresPool({
    url: options.url,
    migrations: { evidence: postgresEvidenceStoreMigrations },
    what: 'evidence store',
  });
  return { ...createPostgresEvidenceStore(pool, options), close: () => pool.end() };
}

/**
 * When a row of `table` is live at the parameter `now` (the caller's clock): an in-doubt entry for
 * good, a spent one until its evidence expires, a reserved one until then and its lease lapse.
 */
const liveIn = (table: string, now: string) =>
  `(${table}.state = 'in-doubt' OR (${table}.expires_at > ${now} AND (${table}.state = 'spent' OR ${table}.lease_until > ${now})))`;
const liveAt = (now: string) => liveIn('spent_evidence', now);
const columns = 'id, state, reservation, fingerprint, result, lease_until';

/**
 * The evidence store on a pool whose owner has applied {@link postgresEvidenceStoreMigrations}.
 * SQLite's single writer is replaced by the primary key (docs/scale-out.md): a reservation inserts
 * its ids in one transaction, each `INSERT … ON CONFLICT (id) DO UPDATE … WHERE` the existing row is
 * dead (lapsed or expired, never in doubt), so among any number of reservations of one id through
 * any number of instances exactly one inserts it, and a call holds all its ids or none. Ids are
 * inserted in one fixed order (byte order), so two calls with overlapping ids wait for each other
 * instead of deadlocking. Settling checks that the reservation still holds every id it took.
 * The capacity counts committed live entries: reservations in flight on several instances at once
 * may together pass it by at most their number, but no held id is ever evicted. `close()` leaves
 * the pool to its owner.
 */
export function createPostgresEvidenceStore(pool: pg.Pool, settings: PostgresEvidenceStoreSettings): EvidenceStore {
  const leaseMs = settings.leaseMs ?? DEFAULT_EVIDENCE_LEASE_MS;
  const liveEntries = async (client: pg.Pool | pg.PoolClient, ids: readonly string[], now: number) => {
    const rows = await client.query<EvidenceRow>(
      `SELECT ${columns} FROM spent_evidence WHERE id = ANY($1::text[]) AND ${liveAt('$2')}`,
      [ids, now],
    );
    const byId = new Map(rows.rows.map((row) => [row.id, heldFromRow(row)]));
    // In the call's order, one entry per requested id, as SQLite reads them.
    return ids.flatMap((id) => byId.get(id) ?? []);
  };

  /**
   * Moves every row of `reservation` that is in one of `from` (`set` may use `$3`), or none: throws
   * when the reservation no longer holds every id it took (released, settled, or one id taken over
   * by another call after its lease lapsed). One statement: it locks the reservation's rows, and
   * moves them only when it locked as many as the reservation took (a row another call took over
   * meanwhile no longer matches once its lock is granted).
   */
  const settle = async (
    reservation: string,
    move: { readonly from: readonly EvidenceState[]; readonly set: string; readonly value: unknown },
    failure: string,
  ) => {
    const moved = await pool.query(
      `WITH held AS (
         SELECT id, reservation_size FROM spent_evidence
         WHERE reservation = $1 AND state = ANY($2::text[]) FOR UPDATE)
       UPDATE spent_evidence SET ${move.set}
       WHERE id IN (SELECT id FROM held) AND (SELECT count(*) FROM held) = (SELECT max(reservation_size) FROM held)`,
      [reservation, move.from, move.value],
    );
    if (moved.rowCount === 0) throw new ProxyError('store-failed', failure);
  };

  return {
    async reserve(ids, now, options) {
      try {
        return await reserveAll(pool, ids, now, {
          fingerprint: options?.fingerprint ?? null,
          leaseMs,
          capacity: settings.capacity,
          liveEntries,
        });
      } catch (error) {
        throw new ProxyError('store-failed', 'evidence store reserve failed', { cause: error });
      }
    },
    async markInDoubt(reservation, options) {
      // In doubt, `lease_until` is the sender's lease: it never makes the entry purgeable.
      await settle(
        reservation,
        {
          from: ['reserved', 'in-doubt'],
          set: "state = 'in-doubt', lease_until = $3",
          value: options?.sendingUntil ?? null,
        },
        'reservation expired before the call was sent',
      );
    },
    async commit(reservation, options) {
      await settle(
        reservation,
        {
          from: ['reserved', 'in-doubt'],
          set: "state = 'spent', lease_until = NULL, result = $3",
          value: options?.result ?? null,
        },
        'reservation expired before commit',
      );
    },
    async release(reservation) {
      await pool.query(`DELETE FROM spent_evidence WHERE reservation = $1 AND state IN ('reserved', 'in-doubt')`, [
        reservation,
      ]);
    },
    async lookup(ids, now) {
      return liveEntries(pool, ids, now);
    },
    async isSpent(id, now) {
      return (await liveEntries(pool, [id], now)).length > 0;
    },
    async close() {
      // The pool is its owner's.
    },
  };
}

/** What {@link reserveAll} needs besides the call. */
interface ReserveContext {
  readonly fingerprint: string | null;
  readonly leaseMs: number;
  readonly capacity: number;
  readonly liveEntries: (client: pg.PoolClient, ids: readonly string[], now: number) => Promise<HeldEvidence[]>;
}

/** The check-and-hold of {@link EvidenceStore.reserve}: every id or none, in one transaction. */
async function reserveAll(
  pool: pg.Pool,
  ids: readonly EvidenceId[],
  now: number,
  context: ReserveContext,
): Promise<ReserveResult> {
  const requested = ids.map((evidence) => evidence.id);
  // 1. Housekeeping, beside the reservation on a connection of its own: forget dead rows (lapsed,
  //    expired; never in doubt). SKIP LOCKED, so a purge never waits on a row a reservation holds,
  //    and two purges never wait on each other; committed on its own, so a reservation waits on a
  //    row being purged for that one statement at most. Awaited once the reservation is decided
  //    (marked handled now, in case the connect fails first).
  const purged = pool.query(
    `DELETE FROM spent_evidence WHERE id IN (
       SELECT id FROM spent_evidence WHERE NOT ${liveAt('$1')} FOR UPDATE SKIP LOCKED)`,
    [now],
  );
  purged.catch(() => undefined);
  const client = await pool.connect();
  try {
    // 2. One statement takes every id, in byte order so that overlapping calls queue rather than
    //    deadlock, and only while the live entries leave room for them all (refuse rather than
    //    evict: evicting a held id would let it be replayed). The primary key decides: a row
    //    another call holds, or inserts meanwhile, is not taken, and a call that did not take every
    //    id rolls back what it took. An id named twice takes nothing.
    const reservation = randomUUID();
    const held =
      new Set(requested).size === requested.length &&
      (await inTransaction(client, async () => {
        const inserted = await client.query(
          `INSERT INTO spent_evidence (id, expires_at, state, reservation, reservation_size, lease_until, fingerprint)
           SELECT call.id, call.expires_at, 'reserved', $3, $4::int, $5::bigint, $6
           FROM unnest($1::text[], $2::bigint[]) AS call (id, expires_at)
           WHERE (SELECT count(*) FROM spent_evidence WHERE ${liveAt('$7')}) + $4::int <= $8::int
           ORDER BY call.id COLLATE "C"
           ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at, state = 'reserved',
             reservation = excluded.reservation, reservation_size = excluded.reservation_size,
             lease_until = excluded.lease_until, fingerprint = excluded.fingerprint, result = NULL
           WHERE NOT ${liveAt('$7')}`,
          [
            requested,
            ids.map((evidence) => evidence.expiresAt),
            reservation,
            ids.length,
            now + context.leaseMs,
            context.fingerprint,
            now,
            context.capacity,
          ],
        );
        if (inserted.rowCount !== ids.length) throw new NotAllTaken();
        return true;
      }).catch((error: unknown) => {
        if (error instanceof NotAllTaken) return false;
        throw error;
      }));
    if (held) return { ok: true, reservation };
    // 3. Why not, read once the call holds nothing: an id held (the first, with every holder), no
    //    room, or an id named twice; else another call took an id and has let it go since.
    const holders = await context.liveEntries(client, requested, now);
    const first = holders[0];
    if (first) return { ok: false, reason: 'spent', id: first.id, held: holders };
    const counted = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM spent_evidence WHERE ${liveAt('$1')}`,
      [now],
    );
    if ((counted.rows[0]?.n ?? 0) + ids.length > context.capacity) return { ok: false, reason: 'full' };
    const named = requested.find((id, index) => requested.indexOf(id) !== index);
    return { ok: false, reason: 'spent', id: named ?? requested[0] ?? '', held: [] };
  } finally {
    client.release();
    await purged;
  }
}

interface EvidenceRow {
  readonly id: string;
  readonly state: EvidenceState;
  readonly reservation: string;
  readonly fingerprint: string | null;
  readonly result: string | null;
  /** BIGINT, which node-postgres reads as a string. */
  readonly lease_until: string | null;
}

function heldFromRow(row: EvidenceRow): HeldEvidence {
  return {
    id: row.id,
    state: row.state,
    reservation: row.reservation,
    ...(row.fingerprint !== null && { fingerprint: row.fingerprint }),
    ...(row.result !== null && { result: row.result }),
    ...(row.state === 'in-doubt' && row.lease_until !== null && { sendingUntil: Number(row.lease_until) }),
  };
}

/** Thrown inside the reservation's transaction to roll back what a call took when it did not take every id. */
class NotAllTaken extends Error {
  constructor() {
    super('the call did not take every id it names');
  }
}
