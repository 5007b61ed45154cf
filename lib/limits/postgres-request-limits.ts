import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { inTransaction, type Migration } from '../../proxy/index';
import type { RequestLimitStore } from './request-limits';

/**
 * The limits' tables on PostgreSQL, registered as module `limits` like SQLite's and applied after
 * identity's: a slot's request is counted as pending from identity's `approvals` table. Beside
 * SQLite's columns, `request_limit_locks` holds the household's counter row that every
 * reservation locks, since PostgreSQL has no single writer. Append to change;
 * never edit a shipped one.
 */
export const postgresRequestLimitMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE approval_slots (
      reservation_id TEXT PRIMARY KEY,
      requester TEXT NOT NULL,
      reserved_at BIGINT NOT NULL,
      approval_id TEXT UNIQUE
    );
    CREATE INDEX approval_slots_by_requester ON approval_slots (requester);
    CREATE TABLE rate_events (
      key TEXT NOT NULL,
      at BIGINT NOT NULL
    );
    CREATE INDEX rate_events_by_key ON rate_events (key, at);
    CREATE TABLE request_limit_locks (
      name TEXT PRIMARY KEY
    );
    INSERT INTO request_limit_locks (name) VALUES ('household');`,
  },
];

// A slot counts while its request is pending and unexpired, or while it is being filled (not yet bound).
const live = `(s.approval_id IS NULL AND s.reserved_at > $2)
  OR EXISTS (SELECT 1 FROM approvals a WHERE a.approval_id = s.approval_id AND a.status = 'pending' AND a.expires_at > $1)`;

/**
 * The request limits on a PostgreSQL pool whose owner has applied identity's and
 * {@link postgresRequestLimitMigrations} (issue 28): the caps hold across every instance on the
 * database. Each check-and-take is one transaction that first serialises with its rivals: the
 * approval slots lock the household's counter row (`SELECT … FOR UPDATE`; the household cap spans
 * every requester), a rate limit takes an advisory lock on its key. At `READ COMMITTED` two
 * reservations would otherwise both count 19 and both take the 20th slot. The pool is its owner's.
 */
export function createPostgresRequestLimitStore(pool: pg.Pool): RequestLimitStore {
  /** Runs `work` in one transaction, after `lock` (the statement that serialises it with its rivals). */
  const serialised = async <T>(
    lock: { readonly sql: string; readonly values: readonly unknown[] },
    work: (client: pg.PoolClient) => Promise<T>,
  ): Promise<T> => {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      return await inTransaction(client, async () => {
        await client.query(lock.sql, [...lock.values]);
        return work(client);
      });
    } catch (error) {
      // A connection that failed mid-transaction is discarded, never reused.
      broken = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      client.release(broken);
    }
  };
  // The household's counter row: every reservation and binding takes it, on every instance.
  const household = { sql: "SELECT name FROM request_limit_locks WHERE name = 'household' FOR UPDATE", values: [] };
  // A rate key's lock: a transaction-level advisory lock on its hash, so keys (one per caller)
  // leave no rows behind and different callers do not wait for each other.
  const rateKey = (key: string) => ({
    sql: "SELECT pg_advisory_xact_lock(hashtextextended('emcp-rate/' || $1, 0))",
    values: [key],
  });
  const count = async (client: pg.PoolClient, sql: string, values: readonly unknown[]) =>
    Number((await client.query<{ n: string }>(sql, [...values])).rows[0]?.n ?? 0);

  return {
    async reserveApproval(input) {
      return serialised(household, async (client) => {
        const window = [input.now, input.now - input.holdMs];
        await client.query(`DELETE FROM approval_slots AS s WHERE NOT (${live})`, window);
        const own = await count(
          client,
          `SELECT count(*) AS n FROM approval_slots AS s WHERE s.requester = $3 AND (${live})`,
          [...window, input.requester],
        );
        if (own >= input.perRequester) return { ok: false, scope: 'requester', pending: own };
        // Every pending request counts for the household, with or without a slot, and so do slots being filled.
        const pending = await count(
          client,
          `SELECT (SELECT count(*) FROM approvals WHERE status = 'pending' AND expires_at > $1)
            + (SELECT count(*) FROM approval_slots WHERE approval_id IS NULL AND reserved_at > $2) AS n`,
          window,
        );
        if (pending >= input.perHousehold) return { ok: false, scope: 'household', pending };
        const reservation = randomUUID();
        await client.query('INSERT INTO approval_slots (reservation_id, requester, reserved_at) VALUES ($1, $2, $3)', [
          reservation,
          input.requester,
          input.now,
        ]);
        return { ok: true, reservation };
      });
    },
    async bindApproval(reservation, approvalId) {
      // Under the household's lock too: two slots bound to one request at once would otherwise both
      // find it unbound, and the second would break the unique key instead of freeing its slot.
      await serialised(household, async (client) => {
        const bound = await client.query('SELECT 1 FROM approval_slots WHERE approval_id = $1', [approvalId]);
        // Asking again for an invoice that already has a request: that request keeps its slot.
        if (bound.rowCount !== 0) {
          await client.query('DELETE FROM approval_slots WHERE reservation_id = $1', [reservation]);
        } else {
          await client.query('UPDATE approval_slots SET approval_id = $1 WHERE reservation_id = $2', [
            approvalId,
            reservation,
          ]);
        }
      });
    },
    async releaseApproval(reservation) {
      await pool.query('DELETE FROM approval_slots WHERE reservation_id = $1', [reservation]);
    },
    async take(input) {
      return serialised(rateKey(input.key), async (client) => {
        await client.query('DELETE FROM rate_events WHERE key = $1 AND at <= $2', [
          input.key,
          input.now - input.windowMs,
        ]);
        const found = await client.query<{ n: string; oldest: number | null }>(
          'SELECT count(*) AS n, min(at)::float8 AS oldest FROM rate_events WHERE key = $1',
          [input.key],
        );
        const n = Number(found.rows[0]?.n ?? 0);
        const oldest = found.rows[0]?.oldest ?? null;
        if (n >= input.limit) {
          return { ok: false, retryAfterMs: Math.max(1, (oldest ?? input.now) + input.windowMs - input.now) };
        }
        await client.query('INSERT INTO rate_events (key, at) VALUES ($1, $2)', [input.key, input.now]);
        return { ok: true };
      });
    },
  };
}
