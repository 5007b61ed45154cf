import type Database from 'better-sqlite3';
import type { HouseholdEvent } from '../events';
import { createAuditFeed } from './audit-feed';
import { AuditQuerySchema, appendableEvent, auditFilterColumns, maxAuditLimit, toAuditEntry } from './audit-rows';
import type { StoredAuditRow } from './check-audit-row';
import { canonicalJson, genesisHash, hashAuditRow } from './hash-audit-row';

/** One row of the audit chain, as the live log and the audit page read it. */
export interface AuditEntry {
  /** Strictly increasing from 1, without gaps: the live log's event id (`Last-Event-ID`). */
  readonly id: number;
  /** The previous row's hash; the genesis value for row 1. */
  readonly prevHash: string;
  /** SHA-256 (hex) of this row's canonical bytes `{id, prevHash, event}`. */
  readonly hash: string;
  readonly event: HouseholdEvent;
}

/** Which entries {@link AuditLog.after} returns: every given field must match exactly. */
export interface AuditFilter {
  readonly session?: string;
  readonly orderId?: string;
  readonly kind?: string;
  readonly outcome?: HouseholdEvent['outcome'];
}

/** Options of {@link AuditLog.after}. */
export interface AuditQuery {
  /** At most this many entries (default 500, at most 10 000). */
  readonly limit?: number;
  readonly filter?: AuditFilter;
}

/** The chain's last row: what a checkpoint signs. Row 0 with the genesis hash is the empty chain. */
export interface AuditHead {
  readonly rowId: number;
  readonly hash: string;
}

/** Receives entries of the chain as they are appended. */
export type AuditListener = (entry: AuditEntry) => void;

/**
 * The household's append-only, hash-chained audit log (SPEC §8): on the household SQLite file, or
 * on a PostgreSQL database that several instances share (SPEC §11). Every handle on one database
 * extends one chain, in one serial order.
 */
export interface AuditLog {
  /**
   * Writes the event as the chain's next row and resolves with it. The row is committed before the
   * promise resolves, so an event is in the chain before the response it describes leaves the
   * process. Appends made through one handle without waiting take ids in the order they were made.
   * Rejects on an event that fails the schema or a database fault.
   */
  append(event: HouseholdEvent): Promise<AuditEntry>;
  /** Entries with an id above `id`, in id order: the live log's history and its `Last-Event-ID` resume. */
  after(id: number, options?: AuditQuery): Promise<readonly AuditEntry[]>;
  /** Every entry about one order (invoice `jti`), in id order. */
  forOrder(orderId: string): Promise<readonly AuditEntry[]>;
  /** The chain's last row as it is now. */
  head(): Promise<AuditHead>;
  /**
   * Up to `limit` stored rows with an id above `id`, in id order, exactly as stored and unparsed:
   * what the checkpointer re-verifies before it signs (a row edited at rest must not be skipped).
   */
  rows(id: number, limit: number): Promise<readonly StoredAuditRow[]>;
  /**
   * Calls `listener` with every entry above `after` (default: the head when the subscription
   * starts), whichever handle on the same database appended it, in id order, each once, without
   * gaps; returns the unsubscribe. Rows appended through this handle arrive at once; others' as
   * the implementation learns of them (docs/scale-out.md).
   */
  subscribe(listener: AuditListener, options?: { readonly after?: number }): () => void;
}

/** Options of {@link createSqliteAuditLog}. */
export interface SqliteAuditLogOptions {
  /**
   * How often, while anyone is subscribed, the table is read for rows another process appended to
   * the same file (default 1000 ms). Rows appended through this handle are delivered at once.
   */
  readonly pollMs?: number;
  /** A poll that failed (the file went away); the next one tries again. */
  readonly onError?: (error: unknown) => void;
}

/**
 * The audit log on the household database (migrated by `lib/store.ts`). Each append is one
 * `BEGIN IMMEDIATE` transaction that reads the head and inserts the next row, so two processes
 * sharing the file extend one chain and never fork it. better-sqlite3 is synchronous: the row is
 * committed when the returned promise is made. Subscribers see this handle's rows at once and
 * other processes' at the next poll.
 */
export function createSqliteAuditLog(database: Database.Database, options: SqliteAuditLogOptions = {}): AuditLog {
  const last = database.prepare<[], { id: number; hash: string }>(
    'SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1',
  );
  const insert = database.prepare<[number, string, string, string]>(
    'INSERT INTO audit_log (id, event, prev_hash, hash) VALUES (?, ?, ?, ?)',
  );
  const stored = database.prepare<[number, number], StoredAuditRow>(
    'SELECT id, event, prev_hash AS prevHash, hash FROM audit_log WHERE id > ? ORDER BY id LIMIT ?',
  );

  const write = database.transaction((event: HouseholdEvent, text: string): AuditEntry => {
    const head = last.get();
    const id = (head?.id ?? 0) + 1;
    const prevHash = head?.hash ?? genesisHash;
    const hash = hashAuditRow({ id, prevHash, event });
    insert.run(id, text, prevHash, hash);
    return { id, prevHash, hash, event };
  });

  const select = (id: number, query: AuditQuery): readonly AuditEntry[] => {
    const parsed = AuditQuerySchema.parse({ id, ...query });
    const clauses = ['id > @id'];
    const parameters: Record<string, string | number> = { id: parsed.id, limit: parsed.limit };
    for (const [field, column] of Object.entries(auditFilterColumns)) {
      const value = parsed.filter[field as keyof typeof auditFilterColumns];
      if (value === undefined) continue;
      clauses.push(`${column} = @${field}`);
      parameters[field] = value;
    }
    const rows = database
      .prepare<Record<string, string | number>, StoredAuditRow>(
        `SELECT id, event, prev_hash AS prevHash, hash FROM audit_log WHERE ${clauses.join(' AND ')} ORDER BY id LIMIT @limit`,
      )
      .all(parameters);
    return rows.flatMap((row) => {
      const entry = toAuditEntry(row);
      // A row that no longer parses was edited outside the app: the verifier names it; readers skip it.
      return entry === undefined ? [] : [entry];
    });
  };
  const head = (): AuditHead => {
    const row = last.get();
    return row === undefined ? { rowId: 0, hash: genesisHash } : { rowId: row.id, hash: row.hash };
  };
  const readRows = (id: number, limit: number) => stored.all(id, Math.max(1, Math.min(limit, maxAuditLimit)));

  let poll: ReturnType<typeof setInterval> | undefined;
  const feed = createAuditFeed({
    rows: async (id, limit) => readRows(id, limit),
    head: async () => head(),
    onActive(active) {
      if (active) {
        poll = setInterval(() => feed.poke(), options.pollMs ?? 1000);
        poll.unref();
      } else {
        clearInterval(poll);
        poll = undefined;
      }
    },
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });

  return {
    async append(event) {
      const parsed = appendableEvent(event);
      const entry = write.immediate(parsed, canonicalJson(parsed));
      feed.committed([entry]);
      return entry;
    },
    after: async (id, query = {}) => select(id, query),
    forOrder: async (orderId) => select(0, { limit: maxAuditLimit, filter: { orderId } }),
    head: async () => head(),
    rows: async (id, limit) => readRows(id, limit),
    subscribe: (listener, subscription = {}) => feed.subscribe(listener, subscription.after),
  };
}
