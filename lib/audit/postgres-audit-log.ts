import type pg from 'pg';
import { inTransaction, listenPostgresChannel } from '../../proxy/index';
import type { Migration } from '../apply-migrations';
import type { HouseholdEvent } from '../events';
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
];

/**
 * The advisory lock key every instance takes to append (a constant, so all code versions agree):
 * the ASCII of "emcp-aud" read as a signed 64-bit integer.
 */
export const auditLockKey = '7308607103741031780';

/** The channel each append transaction notifies, with its last row id as the payload. */
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
 * instance of the household: one chain with several writers. An append takes
 * `pg_advisory_xact_lock(auditLockKey)`, reads the head, inserts the next rows and notifies
 * {@link auditChannel} with the last id, in one transaction (appends made while one is in flight
 * go together in the next): appends through any number of instances
 * commit one at a time, so ids follow commit order and a reader never sees an id before every
 * smaller one. The notification goes out at commit, and only then.
 *
 * While anyone is subscribed, one dedicated connection (outside the pool) is kept to `LISTEN`. A notification only
 * says "read again": each subscriber reads the table after the last row it was given, so a lost or
 * folded notification leaves no gap. When that connection dies the log reconnects with backoff and
 * catches up by id before it relies on notifications again.
 */
export function createPostgresAuditLog(pool: pg.Pool, options: PostgresAuditLogOptions = {}): AuditLog {
  const readRows = async (id: number, limit: number): Promise<readonly StoredAuditRow[]> => {
    const result = await pool.query<StoredRow>(
      'SELECT id, event, prev_hash AS "prevHash", hash FROM audit_log WHERE id > $1 ORDER BY id LIMIT $2',
      [id, Math.max(1, Math.min(limit, maxAuditLimit))],
    );
    return result.rows.map((row) => ({ ...row, id: Number(row.id) }));
  };
  const head = async (): Promise<AuditHead> => {
    const result = await pool.query<HeadRow>('SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1');
    const row = result.rows[0];
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
          onNotification: (payload) => feed.poke(/^[1-9][0-9]{0,15}$/.test(payload) ? Number(payload) : undefined),
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
   * Group commit: one append transaction in flight per handle, and the appends made meanwhile go
   * together in the next one, in the order they were made. The lock and the durable commit are the
   * cost of an append, so a burst of rows (every filter's decision on one call) pays them once, and
   * an awaited row never queues behind a backlog of single-row transactions.
   */
  const waiting: QueuedAppend[] = [];
  let flushing = false;
  const commitBatch = async (batch: readonly QueuedAppend[]): Promise<AuditEntry[]> => {
    const client = await pool.connect();
    let broken: unknown;
    try {
      return await inTransaction(client, async () => {
        // One writer at a time across every instance, until this transaction ends.
        await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [auditLockKey]);
        const last = (await client.query<HeadRow>('SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1')).rows[0];
        let previous = { id: last === undefined ? 0 : Number(last.id), hash: last?.hash ?? genesisHash };
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
        // In id order: the next-id trigger refuses any other (it sees the rows inserted before it).
        await client.query(
          `INSERT INTO audit_log (id, event, prev_hash, hash)
             SELECT id, event, prev_hash, hash
               FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[])
                 WITH ORDINALITY AS given (id, event, prev_hash, hash, position)
               ORDER BY position`,
          [
            entries.map((entry) => entry.id),
            batch.map((queued) => queued.text),
            entries.map((entry) => entry.prevHash),
            entries.map((entry) => entry.hash),
          ],
        );
        // Delivered at commit, and only if it commits: the payload is the batch's last id, never an event.
        await client.query('SELECT pg_notify($1, $2)', [auditChannel, String(previous.id)]);
        return entries;
      });
    } catch (error) {
      broken = error;
      throw error;
    } finally {
      // A connection that failed mid-transaction is discarded, never reused.
      client.release(broken instanceof Error ? broken : undefined);
    }
  };
  const flush = async () => {
    flushing = true;
    while (waiting.length > 0) {
      const batch = waiting.splice(0, maxAppendBatch);
      try {
        const entries = await commitBatch(batch);
        for (const [index, queued] of batch.entries()) queued.resolve(entries[index] as AuditEntry);
        feed.committed(entries);
      } catch (error) {
        // Nothing of the batch committed: each of its appends fails.
        for (const queued of batch) queued.reject(error);
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
