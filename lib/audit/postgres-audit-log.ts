import type pg from 'pg';
import { listenPostgresChannel } from '../../proxy/index';
import type { Migration } from '../apply-migrations';
import type { HouseholdEvent } from '../events';
import { AuditError } from './audit-error';
import { createAuditFeed } from './audit-feed';
import type { AuditEntry, AuditHead, AuditLog } from './audit-log';
import { AuditQuerySchema, appendableEvent, auditFilterColumns, maxAuditLimit, toAuditEntry } from './audit-rows';
import type { StoredAuditRow } from './check-audit-row';
import { canonicalJson, genesisHash, hashAuditRow } from './hash-audit-row';

/**
 * The audit table on PostgreSQL (SPEC §8, §11), registered as module `audit` like SQLite's, with
 * the same columns: `event` holds the canonical JSON bytes, and the filter columns are generated
 * from them (never written), so they cannot disagree with what the hash covers. Triggers refuse
 * `UPDATE`, `DELETE`, `TRUNCATE` and an insert that does not take the next id. They stop app bugs
 * and accidents; whoever owns the database can drop them, which the chain, the signed checkpoints
 * and the witness outside the database catch. Append to change; never edit a shipped one.
 */
export const postgresAuditMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE audit_log (
      id BIGINT PRIMARY KEY CHECK (id >= 1),
      event TEXT NOT NULL,
      prev_hash TEXT NOT NULL CHECK (length(prev_hash) = 64),
      hash TEXT NOT NULL CHECK (length(hash) = 64),
      kind TEXT GENERATED ALWAYS AS ((event::json) ->> 'kind') STORED,
      outcome TEXT GENERATED ALWAYS AS ((event::json) ->> 'outcome') STORED,
      session TEXT GENERATED ALWAYS AS ((event::json) ->> 'session') STORED,
      order_id TEXT GENERATED ALWAYS AS ((event::json) ->> 'orderId') STORED
    );
    CREATE INDEX audit_log_session ON audit_log (session, id);
    CREATE INDEX audit_log_order ON audit_log (order_id, id);
    CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'the audit log is append-only: % refused', TG_OP;
    END
    $$;
    CREATE TRIGGER audit_log_keep_rows BEFORE UPDATE OR DELETE ON audit_log
      FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
    CREATE TRIGGER audit_log_keep_table BEFORE TRUNCATE ON audit_log
      FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
    CREATE FUNCTION audit_log_next_id() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.id IS DISTINCT FROM (SELECT COALESCE(MAX(id), 0) + 1 FROM audit_log) THEN
        RAISE EXCEPTION 'the audit log is append-only: a row must take the next id';
      END IF;
      RETURN NEW;
    END
    $$;
    CREATE TRIGGER audit_log_append_in_order BEFORE INSERT ON audit_log
      FOR EACH ROW EXECUTE FUNCTION audit_log_next_id();`,
  },
  {
    // One round trip per append batch: the lock, the check against the head and the insert run
    // in the server, and the lock is held only until that statement's own commit. The caller
    // hashed the rows on the head it expects; the first must take the next id and name the head's
    // hash, or nothing is written and the head is returned, for the caller to hash the rows on it
    // again. VOLATILE, so the head is read with a snapshot taken once the lock is granted.
    version: 2,
    sql: `CREATE FUNCTION audit_log_append(ids BIGINT[], events TEXT[], prev_hashes TEXT[], hashes TEXT[])
      RETURNS TABLE (appended BOOLEAN, head_id BIGINT, head_hash TEXT)
      LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      current_id BIGINT;
      current_hash TEXT;
    BEGIN
      -- auditLockKey and auditChannel, written out: a shipped migration never changes.
      PERFORM pg_advisory_xact_lock(7308607103741031780);
      SELECT audit_log.id, audit_log.hash INTO current_id, current_hash
        FROM audit_log ORDER BY audit_log.id DESC LIMIT 1;
      IF NOT FOUND THEN
        current_id := 0;
        current_hash := repeat('0', 64);
      END IF;
      IF ids[1] IS DISTINCT FROM current_id + 1 OR prev_hashes[1] IS DISTINCT FROM current_hash THEN
        RETURN QUERY SELECT false, current_id, current_hash;
        RETURN;
      END IF;
      -- In id order: the next-id trigger refuses any other (it sees the rows inserted before it).
      INSERT INTO audit_log (id, event, prev_hash, hash)
        SELECT given.id, given.event, given.prev_hash, given.hash
          FROM unnest(ids, events, prev_hashes, hashes)
            WITH ORDINALITY AS given (id, event, prev_hash, hash, position)
          ORDER BY given.position;
      -- Delivered at commit, and only if it commits: the payload is the batch's last id and hash,
      -- never an event; listeners hash their next batch on it.
      PERFORM pg_notify('audit_rows', ids[array_upper(ids, 1)]::text || ' ' || hashes[array_upper(hashes, 1)]);
      RETURN QUERY SELECT true, ids[array_upper(ids, 1)], hashes[array_upper(hashes, 1)];
    END
    $$;`,
  },
];

/**
 * The advisory lock key every instance takes to append (a constant, so all code versions agree):
 * the ASCII of "emcp-aud" read as a signed 64-bit integer. `audit_log_append` (migration 2) takes it.
 */
export const auditLockKey = '7308607103741031780';

/** The channel each append transaction notifies, with its last row's id and hash as the payload. */
export const auditChannel = 'audit_rows';

/** Options of {@link createPostgresAuditLog}. */
export interface PostgresAuditLogOptions {
  /** A listener connection that failed, or a read that did; the log reconnects and catches up. */
  readonly onError?: (error: unknown) => void;
  /** The listener's state: `listening` once `LISTEN` is in place (and caught up), `lost` when its connection died. */
  readonly onListener?: (state: 'listening' | 'lost') => void;
  /** Milliseconds before the first reconnect, doubled per failure up to `max` (default 100 and 5000). */
  readonly reconnect?: { readonly first: number; readonly max: number };
}

/** The most rows one append transaction takes; more wait for the next one. */
const maxAppendBatch = 200;

/** Attempts of one batch whose head another instance moved each time, before its appends fail. */
const maxAppendAttempts = 50;

/** An append waiting for its transaction. */
interface QueuedAppend {
  readonly event: HouseholdEvent;
  /** Its canonical JSON bytes, which the row stores and the hash covers. */
  readonly text: string;
  resolve(entry: AuditEntry): void;
  reject(error: unknown): void;
}

interface HeadRow {
  id: string;
  hash: string;
}

interface StoredRow {
  id: string;
  event: string;
  prevHash: string;
  hash: string;
}

/**
 * The audit log on a pool whose owner has applied {@link postgresAuditMigrations}, shared by every
 * instance of the household: one chain with several writers. An append is one call of
 * `audit_log_append`, which takes `pg_advisory_xact_lock(auditLockKey)`, checks the rows against
 * the head, inserts them and notifies {@link auditChannel} with the last id, in one transaction
 * (appends made while one is in flight go together in the next): appends through any number of
 * instances commit one at a time, so ids follow commit order and a reader never sees an id before
 * every smaller one. The notification goes out at commit, and only then.
 *
 * While anyone is subscribed, one dedicated connection (outside the pool) is kept to `LISTEN`. A notification only
 * says "read again": each subscriber reads the table after the last row it was given, so a lost or
 * folded notification leaves no gap. When that connection dies the log reconnects with backoff and
 * catches up by id before it relies on notifications again.
 */
export function createPostgresAuditLog(pool: pg.Pool, options: PostgresAuditLogOptions = {}): AuditLog {
  /** The newest head this handle knows of (its own last batch, a row read, a notification): its next batch's guess. */
  let knownHead: AuditHead = { rowId: 0, hash: genesisHash };
  /** The last id of the batch being appended, while one is: a notification up to it is this batch's, or covered by it. */
  let appendingThrough: number | undefined;
  const learn = (rowId: number, hash: string) => {
    if (rowId > knownHead.rowId) knownHead = { rowId, hash };
  };
  const readRows = async (id: number, limit: number): Promise<readonly StoredAuditRow[]> => {
    const result = await pool.query<StoredRow>(
      'SELECT id, event, prev_hash AS "prevHash", hash FROM audit_log WHERE id > $1 ORDER BY id LIMIT $2',
      [id, Math.max(1, Math.min(limit, maxAuditLimit))],
    );
    const rows = result.rows.map((row) => ({ ...row, id: Number(row.id) }));
    // The newest row read is the next batch's guess at the head (the server checks it).
    const last = rows[rows.length - 1];
    if (last !== undefined) learn(last.id, last.hash);
    return rows;
  };
  const head = async (): Promise<AuditHead> => {
    const result = await pool.query<HeadRow>('SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1');
    const row = result.rows[0];
    if (row !== undefined) learn(Number(row.id), row.hash);
    return row === undefined ? { rowId: 0, hash: genesisHash } : { rowId: Number(row.id), hash: row.hash };
  };
  const select = async (id: number, query: Parameters<AuditLog['after']>[1] = {}): Promise<readonly AuditEntry[]> => {
    const parsed = AuditQuerySchema.parse({ id, ...query });
    const parameters: (string | number)[] = [parsed.id];
    const clauses = ['id > $1'];
    for (const [field, column] of Object.entries(auditFilterColumns)) {
      const value = parsed.filter[field as keyof typeof auditFilterColumns];
      if (value === undefined) continue;
      parameters.push(value);
      clauses.push(`${column} = $${parameters.length}`);
    }
    parameters.push(parsed.limit);
    const result = await pool.query<StoredRow>(
      `SELECT id, event, prev_hash AS "prevHash", hash FROM audit_log WHERE ${clauses.join(' AND ')} ORDER BY id LIMIT $${parameters.length}`,
      parameters,
    );
    return result.rows.flatMap((row) => {
      // A row that no longer parses was edited outside the app: the verifier names it; readers skip it.
      const entry = toAuditEntry({ ...row, id: Number(row.id) });
      return entry === undefined ? [] : [entry];
    });
  };

  let stopListening: (() => void) | undefined;
  const feed = createAuditFeed({
    rows: readRows,
    head,
    onActive(active) {
      if (active)
        stopListening = listenPostgresChannel(pool, {
          channel: auditChannel,
          // The payload is the last id of a committed batch: subscribers already past it read nothing.
          onNotification: (payload) => {
            // `<id>` (the transaction of earlier versions) or `<id> <hash>` (audit_log_append).
            const parsed = /^([1-9][0-9]{0,15})(?: ([0-9a-f]{64}))?$/.exec(payload);
            const through = parsed?.[1] === undefined ? undefined : Number(parsed[1]);
            // A guess only: the next batch is hashed on it, and the server checks it.
            if (through !== undefined && parsed?.[2] !== undefined) learn(through, parsed[2]);
            // Up to the batch this handle is appending: that batch's end hands its rows over, and
            // a subscriber behind them reads then (feed.committed), or all read if it failed.
            if (through !== undefined && appendingThrough !== undefined && through <= appendingThrough) return;
            feed.poke(through);
          },
          onState(state) {
            // Rows committed while nobody listened are read now, by id.
            if (state === 'listening') feed.poke();
            options.onListener?.(state);
          },
          ...(options.onError === undefined ? {} : { onError: options.onError }),
          ...(options.reconnect === undefined ? {} : { reconnect: options.reconnect }),
        });
      else {
        stopListening?.();
        stopListening = undefined;
      }
    },
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });

  /**
   * Group commit: one append in flight per handle, and the appends made meanwhile go together in
   * the next one, in the order they were made. The lock and the durable commit are the cost of an
   * append, so a burst of rows (every filter's decision on one call) pays them once, and an
   * awaited row never queues behind a backlog of single-row transactions.
   *
   * A batch is one statement, `audit_log_append`, in its own transaction: the rows are hashed here
   * on the head this handle last knew (its own last batch, or the rows it last read), and the
   * server writes them only if that is still the head, under the lock, or returns the head it
   * found. So a batch costs one round trip when no other instance wrote since, two when one did,
   * and no instance holds the lock while a round trip to a client is under way.
   */
  const waiting: QueuedAppend[] = [];
  let flushing = false;
  const commitBatch = async (batch: readonly QueuedAppend[]): Promise<AuditEntry[]> => {
    for (let attempt = 1; ; attempt++) {
      let previous = { id: knownHead.rowId, hash: knownHead.hash };
      const entries = batch.map(({ event }): AuditEntry => {
        const id = previous.id + 1;
        const entry = {
          id,
          prevHash: previous.hash,
          hash: hashAuditRow({ id, prevHash: previous.hash, event }),
          event,
        };
        previous = entry;
        return entry;
      });
      appendingThrough = previous.id;
      const result = await pool.query<{ appended: boolean; head_id: string; head_hash: string }>(
        'SELECT appended, head_id, head_hash FROM audit_log_append($1::bigint[], $2::text[], $3::text[], $4::text[])',
        [
          entries.map((entry) => entry.id),
          batch.map((queued) => queued.text),
          entries.map((entry) => entry.prevHash),
          entries.map((entry) => entry.hash),
        ],
      );
      const row = result.rows[0];
      if (row === undefined) throw new AuditError('append-unanswered', 'audit_log_append returned no row');
      if (row.appended) {
        learn(previous.id, previous.hash);
        return entries;
      }
      // Another instance appended since: hash the batch again on the head the server found (which
      // decides, even over a newer head this handle thought it had read).
      knownHead = { rowId: Number(row.head_id), hash: row.head_hash };
      if (attempt >= maxAppendAttempts) {
        throw new AuditError(
          'append-contended',
          `other writers moved the audit head under ${maxAppendAttempts} attempts in a row: the batch was not appended`,
        );
      }
    }
  };
  const flush = async () => {
    flushing = true;
    while (waiting.length > 0) {
      const batch = waiting.splice(0, maxAppendBatch);
      try {
        const entries = await commitBatch(batch);
        appendingThrough = undefined;
        for (const [index, queued] of batch.entries()) queued.resolve(entries[index] as AuditEntry);
        feed.committed(entries);
      } catch (error) {
        appendingThrough = undefined;
        // Nothing of the batch committed: each of its appends fails. A notification skipped while
        // it was under way is not covered by it, so every subscriber reads again.
        for (const queued of batch) queued.reject(error);
        feed.poke();
      }
    }
    flushing = false;
  };

  return {
    async append(event) {
      const parsed = appendableEvent(event);
      const text = canonicalJson(parsed);
      return new Promise<AuditEntry>((resolve, reject) => {
        waiting.push({ event: parsed, text, resolve, reject });
        if (!flushing) void flush();
      });
    },
    after: (id, query) => select(id, query),
    forOrder: (orderId) => select(0, { limit: maxAuditLimit, filter: { orderId } }),
    head,
    rows: readRows,
    subscribe: (listener, subscription = {}) => feed.subscribe(listener, subscription.after),
  };
}
