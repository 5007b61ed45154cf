import type Database from 'better-sqlite3';
import { z } from 'zod';
import { HouseholdEvent } from '../events';
import type { StoredAuditRow } from './check-audit-row';
import { canonicalJson, genesisHash, hashAuditRow } from './hash-audit-row';
import { parseJson } from './parse-json';

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

/** Receives each entry appended by this process, after it is on disk. */
export type AuditListener = (entry: AuditEntry) => void;

/**
 * The household's append-only, hash-chained audit log (SPEC §8) on the household SQLite file.
 * Behind an interface so a shared database can replace the file (SPEC §11).
 */
export interface AuditLog {
  /**
   * Writes the event as the chain's next row and returns it. Synchronous: the row is committed
   * before this returns, so an event is on disk before the response it describes leaves the
   * process. Throws on an event that fails the schema or a database fault.
   */
  append(event: HouseholdEvent): AuditEntry;
  /** Entries with an id above `id`, in id order: the live log's history and its `Last-Event-ID` resume. */
  after(id: number, options?: AuditQuery): readonly AuditEntry[];
  /** Every entry about one order (invoice `jti`), in id order. */
  forOrder(orderId: string): readonly AuditEntry[];
  /** The chain's last row as it is now. */
  head(): AuditHead;
  /**
   * Up to `limit` stored rows with an id above `id`, in id order, exactly as stored and unparsed:
   * what the checkpointer re-verifies before it signs (a row edited at rest must not be skipped).
   */
  rows(id: number, limit: number): readonly StoredAuditRow[];
  /** Calls `listener` with every entry this process appends from now on; returns the unsubscribe. */
  subscribe(listener: AuditListener): () => void;
}

const defaultLimit = 500;
const maxLimit = 10_000;

const Query = z.strictObject({
  id: z.number().int().min(0),
  limit: z.number().int().min(1).max(maxLimit).default(defaultLimit),
  filter: z
    .strictObject({
      session: z.string().max(200).optional(),
      orderId: z.string().max(200).optional(),
      kind: z.string().max(200).optional(),
      outcome: HouseholdEvent.shape.outcome.optional(),
    })
    .default({}),
});

const Row = z.object({
  id: z.number().int(),
  event: z.string(),
  prev_hash: z.string(),
  hash: z.string(),
});

/** The filter fields and the generated column each one matches (constants: never user text). */
const filterColumns = { session: 'session', orderId: 'order_id', kind: 'kind', outcome: 'outcome' } as const;

/** Lone UTF-16 surrogates, which JSON canonicalisation (RFC 8785) cannot encode. */
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * The audit log on the household database (migrated by `lib/store.ts`). Each append is one
 * `BEGIN IMMEDIATE` transaction that reads the head and inserts the next row, so two processes
 * sharing the file extend one chain and never fork it.
 */
export function createSqliteAuditLog(database: Database.Database): AuditLog {
  const last = database.prepare<[], { id: number; hash: string }>(
    'SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1',
  );
  const insert = database.prepare<[number, string, string, string]>(
    'INSERT INTO audit_log (id, event, prev_hash, hash) VALUES (?, ?, ?, ?)',
  );
  const stored = database.prepare<[number, number], StoredAuditRow>(
    'SELECT id, event, prev_hash AS prevHash, hash FROM audit_log WHERE id > ? ORDER BY id LIMIT ?',
  );
  const listeners = new Set<AuditListener>();

  const write = database.transaction((event: HouseholdEvent, text: string): AuditEntry => {
    const head = last.get();
    const id = (head?.id ?? 0) + 1;
    const prevHash = head?.hash ?? genesisHash;
    const hash = hashAuditRow({ id, prevHash, event });
    insert.run(id, text, prevHash, hash);
    return { id, prevHash, hash, event };
  });

  const select = (id: number, options: AuditQuery): readonly AuditEntry[] => {
    const query = Query.parse({ id, ...options });
    const clauses = ['id > @id'];
    const parameters: Record<string, string | number> = { id: query.id, limit: query.limit };
    for (const [field, column] of Object.entries(filterColumns)) {
      const value = query.filter[field as keyof typeof filterColumns];
      if (value === undefined) continue;
      clauses.push(`${column} = @${field}`);
      parameters[field] = value;
    }
    const rows = database
      .prepare(
        `SELECT id, event, prev_hash, hash FROM audit_log WHERE ${clauses.join(' AND ')} ORDER BY id LIMIT @limit`,
      )
      .all(parameters);
    return rows.flatMap((row) => {
      const entry = toEntry(row);
      // A row that no longer parses was edited outside the app: the verifier names it; readers skip it.
      return entry === undefined ? [] : [entry];
    });
  };

  return {
    append(event) {
      // The schema again at the boundary, then strings made well-formed so canonicalisation cannot
      // refuse an event (a lone surrogate in a tool name must not keep a decision out of the log).
      const parsed = HouseholdEvent.parse(wellFormed(HouseholdEvent.parse(event)));
      const entry = write.immediate(parsed, canonicalJson(parsed));
      for (const listener of listeners) {
        try {
          listener(entry);
        } catch {
          // The row is committed; a failing reader (a closed SSE stream) must not fail the append
          // nor starve the other readers. Readers report their own faults.
        }
      }
      return entry;
    },
    after: (id, options = {}) => select(id, options),
    forOrder: (orderId) => select(0, { limit: maxLimit, filter: { orderId } }),
    head() {
      const row = last.get();
      return row === undefined ? { rowId: 0, hash: genesisHash } : { rowId: row.id, hash: row.hash };
    },
    rows: (id, limit) => stored.all(id, Math.max(1, Math.min(limit, maxLimit))),
    subscribe(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
  };
}

/** A stored row as an entry, or `undefined` when its bytes are not a household event. */
function toEntry(row: unknown): AuditEntry | undefined {
  const parsedRow = Row.safeParse(row);
  if (!parsedRow.success) return undefined;
  const event = HouseholdEvent.safeParse(parseJson(parsedRow.data.event));
  if (!event.success) return undefined;
  return { id: parsedRow.data.id, prevHash: parsedRow.data.prev_hash, hash: parsedRow.data.hash, event: event.data };
}

/** The value with every lone surrogate in its strings replaced by U+FFFD. */
function wellFormed(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(loneSurrogate, '\uFFFD');
  if (Array.isArray(value)) return value.map(wellFormed);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [String(wellFormed(key)), wellFormed(item)]));
  }
  return value;
}
