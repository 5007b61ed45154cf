import type pg from 'pg';
import { inTransaction, listenPostgresChannel } from '../../proxy/index';
import type { Migration } from '../apply-migrations';
import type { ChatStore } from './chat-store';
import type { ChatEventBody } from './types';

/**
 * The chat tables on PostgreSQL (SPEC §8, §11), registered as module `chat` like SQLite's, with
 * the same columns and keys in their final shape. Append to change; never edit a shipped one.
 */
export const postgresChatMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE chat_sessions (
      session_id TEXT PRIMARY KEY,
      created_at TEXT NOT NULL,
      last_event_id INTEGER NOT NULL DEFAULT 0 CHECK (last_event_id >= 0)
    );
    CREATE TABLE chat_events (
      session_id TEXT NOT NULL REFERENCES chat_sessions (session_id),
      id INTEGER NOT NULL CHECK (id >= 1),
      at TEXT NOT NULL,
      type TEXT NOT NULL,
      body TEXT NOT NULL,
      PRIMARY KEY (session_id, id)
    );
    CREATE TABLE chat_session_secrets (
      secret_hash TEXT PRIMARY KEY,
      session_id TEXT NOT NULL UNIQUE REFERENCES chat_sessions (session_id)
    );`,
  },
];

/** The channel each append notifies, with `session id:event id` as the payload (never the event). */
export const chatChannel = 'chat_events';

/** Options of {@link createPostgresChatStore}. */
export interface PostgresChatStoreOptions {
  /** A listener connection that failed; the store reconnects and its watchers read again. */
  readonly onError?: (error: unknown) => void;
  /** The listener's state: `listening` once `LISTEN` is in place, `lost` when its connection died. */
  readonly onListener?: (state: 'listening' | 'lost') => void;
  /** Milliseconds before the listener's first reconnect, doubled per failure up to `max` (default 100 and 5000). */
  readonly reconnect?: { readonly first: number; readonly max: number };
}

/**
 * The chat store on a pool whose owner has applied {@link postgresChatMigrations}. An append takes
 * the next id by an `UPDATE … RETURNING` on the session's row and inserts the event in the same
 * transaction. The row lock that `UPDATE` takes is held until commit, so the appends of one
 * session, through any number of instances, commit one at a time in id order: a reader never sees
 * an id before every smaller one has committed, and `after(id)` resumes without gaps
 * (docs/scale-out.md: ids follow commit order). Other sessions append meanwhile.
 *
 * Each append notifies {@link chatChannel} in its transaction, so the notification goes out at
 * commit and only then. While any reader of this handle watches a session, one dedicated
 * connection listens (`listenPostgresChannel`) and pokes the watchers of the session named; after
 * it reconnects it pokes every watcher, which read by id what was committed meanwhile.
 */
export function createPostgresChatStore(pool: pg.Pool, options: PostgresChatStoreOptions = {}): ChatStore {
  const watchers = new Map<string, Set<() => void>>();
  let stopListening: (() => void) | undefined;
  const pokeAll = () => {
    for (const set of watchers.values()) for (const poke of set) poke();
  };
  const onNotification = (payload: string) => {
    // `session id:event id`; the session id is the text before the last colon.
    const sessionId = payload.slice(0, Math.max(0, payload.lastIndexOf(':')));
    for (const poke of watchers.get(sessionId) ?? []) poke();
  };
  return {
    async createSession(sessionId, at) {
      await pool.query(
        'INSERT INTO chat_sessions (session_id, created_at) VALUES ($1, $2) ON CONFLICT (session_id) DO NOTHING',
        [sessionId, at],
      );
    },
    async hasSession(sessionId) {
      return (await pool.query('SELECT 1 FROM chat_sessions WHERE session_id = $1', [sessionId])).rowCount === 1;
    },
    async append(sessionId, body, at) {
      const client = await pool.connect();
      try {
        return await inTransaction(client, async () => {
          const next = await client.query<{ id: number }>(
            'UPDATE chat_sessions SET last_event_id = last_event_id + 1 WHERE session_id = $1 RETURNING last_event_id AS id',
            [sessionId],
          );
          const id = next.rows[0]?.id;
          if (id === undefined) throw new Error(`unknown chat session ${sessionId}`);
          await client.query('INSERT INTO chat_events (session_id, id, at, type, body) VALUES ($1, $2, $3, $4, $5)', [
            sessionId,
            id,
            at,
            body.type,
            JSON.stringify(body),
          ]);
          // Delivered at commit, and only if it commits: the payload names the row, never the event.
          await client.query('SELECT pg_notify($1, $2)', [chatChannel, `${sessionId}:${id}`]);
          return { id, at, ...body };
        });
      } finally {
        client.release();
      }
    },
    async after(sessionId, afterId) {
      const rows = await pool.query<{ id: number; at: string; body: string }>(
        'SELECT id, at, body FROM chat_events WHERE session_id = $1 AND id > $2 ORDER BY id',
        [sessionId, afterId],
      );
      // Rows are only ever written by `append` above from typed bodies: the store's own bytes.
      return rows.rows.map((row) => ({ id: row.id, at: row.at, ...(JSON.parse(row.body) as ChatEventBody) }));
    },
    async bindSecret(sessionId, secretHash) {
      await pool.query('INSERT INTO chat_session_secrets (secret_hash, session_id) VALUES ($1, $2)', [
        secretHash,
        sessionId,
      ]);
    },
    async sessionOfSecret(secretHash) {
      const rows = await pool.query<{ session_id: string }>(
        'SELECT session_id FROM chat_session_secrets WHERE secret_hash = $1',
        [secretHash],
      );
      return rows.rows[0]?.session_id;
    },
    watch(sessionId, poke) {
      const set = watchers.get(sessionId) ?? new Set();
      watchers.set(sessionId, set);
      // A fresh function per watch, so one reader watching twice is two watchers.
      const watcher = () => poke();
      set.add(watcher);
      stopListening ??= listenPostgresChannel(pool, {
        channel: chatChannel,
        onNotification,
        onState(state) {
          // Back after a loss (or first up): whatever was committed meanwhile is read by id.
          if (state === 'listening') pokeAll();
          options.onListener?.(state);
        },
        ...(options.onError === undefined ? {} : { onError: options.onError }),
        ...(options.reconnect === undefined ? {} : { reconnect: options.reconnect }),
      });
      return () => {
        set.delete(watcher);
        if (set.size === 0) watchers.delete(sessionId);
        if (watchers.size > 0) return;
        stopListening?.();
        stopListening = undefined;
      };
    },
  };
}
