import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { Migration } from '../../proxy/index';
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
  {
    // Each check-and-take in one statement (its own transaction), the steps of version 1's
    // transactions in the same order, so a reservation, a binding or a rate take is one round
    // trip instead of five to seven. VOLATILE, so each step reads with a snapshot taken after the
    // lock: what the previous holder committed is counted.
    version: 2,
    sql: `CREATE FUNCTION limits_reserve_approval(
        given_reservation TEXT,
        given_requester TEXT,
        now_ms BIGINT,
        hold_ms BIGINT,
        per_requester BIGINT,
        per_household BIGINT
      ) RETURNS TABLE (ok BOOLEAN, refused_scope TEXT, pending BIGINT)
      LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      counted BIGINT;
    BEGIN
      -- The household's counter row: every reservation and binding takes it, on every instance.
      PERFORM 1 FROM request_limit_locks WHERE name = 'household' FOR UPDATE;
      -- A slot counts while its request is pending and unexpired, or while it is being filled (not yet bound).
      DELETE FROM approval_slots AS s WHERE NOT (
        (s.approval_id IS NULL AND s.reserved_at > now_ms - hold_ms)
        OR EXISTS (SELECT 1 FROM approvals a
          WHERE a.approval_id = s.approval_id AND a.status = 'pending' AND a.expires_at > now_ms));
      SELECT count(*) INTO counted FROM approval_slots AS s WHERE s.requester = given_requester AND (
        (s.approval_id IS NULL AND s.reserved_at > now_ms - hold_ms)
        OR EXISTS (SELECT 1 FROM approvals a
          WHERE a.approval_id = s.approval_id AND a.status = 'pending' AND a.expires_at > now_ms));
      IF counted >= per_requester THEN
        RETURN QUERY SELECT false, 'requester'::text, counted;
        RETURN;
      END IF;
      -- Every pending request counts for the household, with or without a slot, and so do slots being filled.
      SELECT (SELECT count(*) FROM approvals a WHERE a.status = 'pending' AND a.expires_at > now_ms)
        + (SELECT count(*) FROM approval_slots s WHERE s.approval_id IS NULL AND s.reserved_at > now_ms - hold_ms)
        INTO counted;
      IF counted >= per_household THEN
        RETURN QUERY SELECT false, 'household'::text, counted;
        RETURN;
      END IF;
      INSERT INTO approval_slots (reservation_id, requester, reserved_at) VALUES (given_reservation, given_requester, now_ms);
      RETURN QUERY SELECT true, NULL::text, NULL::bigint;
    END
    $$;

    CREATE FUNCTION limits_bind_approval(given_reservation TEXT, given_approval TEXT) RETURNS VOID
      LANGUAGE plpgsql VOLATILE AS $$
    BEGIN
      -- Under the household's lock too: two slots bound to one request at once would otherwise both
      -- find it unbound, and the second would break the unique key instead of freeing its slot.
      PERFORM 1 FROM request_limit_locks WHERE name = 'household' FOR UPDATE;
      -- Asking again for an invoice that already has a request: that request keeps its slot.
      IF EXISTS (SELECT 1 FROM approval_slots s WHERE s.approval_id = given_approval) THEN
        DELETE FROM approval_slots s WHERE s.reservation_id = given_reservation;
      ELSE
        UPDATE approval_slots s SET approval_id = given_approval WHERE s.reservation_id = given_reservation;
      END IF;
    END
    $$;

    CREATE FUNCTION limits_take(given_key TEXT, now_ms BIGINT, window_ms BIGINT, max_events BIGINT)
      RETURNS TABLE (ok BOOLEAN, retry_after_ms BIGINT)
      LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      counted BIGINT;
      oldest BIGINT;
    BEGIN
      -- The key's lock: a transaction-level advisory lock on its hash, so keys (one per caller)
      -- leave no rows behind and different callers do not wait for each other.
      PERFORM pg_advisory_xact_lock(hashtextextended('emcp-rate/' || given_key, 0));
      DELETE FROM rate_events e WHERE e.key = given_key AND e.at <= now_ms - window_ms;
      SELECT count(*), min(e.at) INTO counted, oldest FROM rate_events e WHERE e.key = given_key;
      IF counted >= max_events THEN
        RETURN QUERY SELECT false, GREATEST(1, COALESCE(oldest, now_ms) + window_ms - now_ms);
        RETURN;
      END IF;
      INSERT INTO rate_events (key, at) VALUES (given_key, now_ms);
      RETURN QUERY SELECT true, 0::bigint;
    END
    $$;`,
  },
];

/**
 * The request limits on a PostgreSQL pool whose owner has applied identity's and
 * {@link postgresRequestLimitMigrations} (issue 28): the caps hold across every instance on the
 * database. Each check-and-take is one statement, so one transaction, that first serialises with
 * its rivals: the approval slots lock the household's counter row (`SELECT … FOR UPDATE`; the
 * household cap spans every requester), a rate limit takes an advisory lock on its key. At
 * `READ COMMITTED` two reservations would otherwise both count 19 and both take the 20th slot.
 * The pool is its owner's.
 */
export function createPostgresRequestLimitStore(pool: pg.Pool): RequestLimitStore {
  return {
    async reserveApproval(input) {
      const reservation = randomUUID();
      const result = await pool.query<{ ok: boolean; refused_scope: string | null; pending: string | null }>(
        'SELECT ok, refused_scope, pending FROM limits_reserve_approval($1, $2, $3, $4, $5, $6)',
        [reservation, input.requester, input.now, input.holdMs, input.perRequester, input.perHousehold],
      );
      const row = result.rows[0];
      if (row?.ok === true) return { ok: true, reservation };
      return {
        ok: false,
        scope: row?.refused_scope === 'requester' ? 'requester' : 'household',
        pending: Number(row?.pending ?? 0),
      };
    },
    async bindApproval(reservation, approvalId) {
      await pool.query('SELECT limits_bind_approval($1, $2)', [reservation, approvalId]);
    },
    async releaseApproval(reservation) {
      await pool.query('DELETE FROM approval_slots WHERE reservation_id = $1', [reservation]);
    },
    async take(input) {
      const result = await pool.query<{ ok: boolean; retry_after_ms: string }>(
        'SELECT ok, retry_after_ms FROM limits_take($1, $2, $3, $4)',
        [input.key, input.now, input.windowMs, input.limit],
      );
      const row = result.rows[0];
      if (row?.ok === true) return { ok: true };
      return { ok: false, retryAfterMs: Math.max(1, Number(row?.retry_after_ms ?? 1)) };
    },
  };
}
