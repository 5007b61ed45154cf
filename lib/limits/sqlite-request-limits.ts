import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import type { Migration } from '../apply-migrations';
import type { RequestLimitStore } from './request-limits';

/**
 * The limits' tables. Applied after identity's: a slot's request is counted as pending from the
 * `approvals` table itself, so a decision, a decline or an expiry frees the slot with no second
 * bookkeeping to drift.
 */
export const requestLimitMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE approval_slots (
      reservation_id TEXT PRIMARY KEY,
      requester TEXT NOT NULL,
      reserved_at INTEGER NOT NULL,
      approval_id TEXT UNIQUE
    ) STRICT;
    CREATE INDEX approval_slots_by_requester ON approval_slots (requester);
    CREATE TABLE rate_events (
      key TEXT NOT NULL,
      at INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX rate_events_by_key ON rate_events (key, at);`,
  },
];

/** The request limits on the household's SQLite file; each check-and-take is one immediate transaction. */
export function createSqliteRequestLimitStore(database: Database.Database): RequestLimitStore {
  // A slot counts while its request is pending and unexpired, or while it is being filled (not yet bound).
  const live = `(s.approval_id IS NULL AND s.reserved_at > @heldSince)
    OR EXISTS (SELECT 1 FROM approvals a WHERE a.approval_id = s.approval_id AND a.status = 'pending' AND a.expires_at > @now)`;
  const prune = database.prepare<{ now: number; heldSince: number }>(
    `DELETE FROM approval_slots AS s WHERE NOT (${live})`,
  );
  const ownCount = database.prepare<{ requester: string; now: number; heldSince: number }, { n: number }>(
    `SELECT count(*) AS n FROM approval_slots AS s WHERE s.requester = @requester AND (${live})`,
  );
  // Every pending request counts for the household, with or without a slot, and so do slots being filled.
  const householdCount = database.prepare<{ now: number; heldSince: number }, { n: number }>(
    `SELECT (SELECT count(*) FROM approvals WHERE status = 'pending' AND expires_at > @now)
      + (SELECT count(*) FROM approval_slots WHERE approval_id IS NULL AND reserved_at > @heldSince) AS n`,
  );
  const insertSlot = database.prepare<[string, string, number]>(
    'INSERT INTO approval_slots (reservation_id, requester, reserved_at) VALUES (?, ?, ?)',
  );
  const bound = database.prepare<[string], { one: number }>(
    'SELECT 1 AS one FROM approval_slots WHERE approval_id = ?',
  );
  const bindSlot = database.prepare<[string, string]>(
    'UPDATE approval_slots SET approval_id = ? WHERE reservation_id = ?',
  );
  const deleteSlot = database.prepare<[string]>('DELETE FROM approval_slots WHERE reservation_id = ?');
  const forget = database.prepare<[string, number]>('DELETE FROM rate_events WHERE key = ? AND at <= ?');
  const inWindow = database.prepare<[string], { n: number; oldest: number | null }>(
    'SELECT count(*) AS n, min(at) AS oldest FROM rate_events WHERE key = ?',
  );
  const record = database.prepare<[string, number]>('INSERT INTO rate_events (key, at) VALUES (?, ?)');

  const reserve = database.transaction(
    (
      input: Parameters<RequestLimitStore['reserveApproval']>[0],
    ): Awaited<ReturnType<RequestLimitStore['reserveApproval']>> => {
      const window = { now: input.now, heldSince: input.now - input.holdMs };
      prune.run(window);
      const own = ownCount.get({ requester: input.requester, ...window })?.n ?? 0;
      if (own >= input.perRequester) return { ok: false, scope: 'requester', pending: own };
      const household = householdCount.get(window)?.n ?? 0;
      if (household >= input.perHousehold) return { ok: false, scope: 'household', pending: household };
      const reservation = randomUUID();
      insertSlot.run(reservation, input.requester, input.now);
      return { ok: true, reservation };
    },
  );
  const bind = database.transaction((reservation: string, approvalId: string) => {
    // Asking again for an invoice that already has a request: that request keeps its slot.
    if (bound.get(approvalId) !== undefined) deleteSlot.run(reservation);
    else bindSlot.run(approvalId, reservation);
  });
  const take = database.transaction(
    (input: Parameters<RequestLimitStore['take']>[0]): Awaited<ReturnType<RequestLimitStore['take']>> => {
      forget.run(input.key, input.now - input.windowMs);
      const { n, oldest } = inWindow.get(input.key) ?? { n: 0, oldest: null };
      if (n >= input.limit)
        return { ok: false, retryAfterMs: Math.max(1, (oldest ?? input.now) + input.windowMs - input.now) };
      record.run(input.key, input.now);
      return { ok: true };
    },
  );
  return {
    async reserveApproval(input) {
      return reserve.immediate(input);
    },
    async bindApproval(reservation, approvalId) {
      bind.immediate(reservation, approvalId);
    },
    async releaseApproval(reservation) {
      deleteSlot.run(reservation);
    },
    async take(input) {
      return take.immediate(input);
    },
  };
}
