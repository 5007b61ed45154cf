import type Database from 'better-sqlite3';
import type { Migration } from '../apply-migrations';
import type { ChatEvent, ChatEventBody } from './types';

/**
 * The chat sessions' durable event logs (SPEC §8: a reload loses nothing). Each session's events
 * carry ids that increase by one per session; appending assigns the id atomically.
 */
export interface ChatStore {
  createSession(sessionId: string, at: string): Promise<void>;
  hasSession(sessionId: string): Promise<boolean>;
  /** Appends one event and returns it with its id (previous id + 1 in this session). */
  append(sessionId: string, body: ChatEventBody, at: string): Promise<ChatEvent>;
  /** The session's events with an id above `afterId`, in id order. */
  after(sessionId: string, afterId: number): Promise<readonly ChatEvent[]>;
  /**
   * Binds the session to the SHA-256 of its secret (issue 26 defect 4: a chat is opened by a secret
   * only its own origin holds, never by a cookie). Each session has one secret, for life.
   */
  bindSecret(sessionId: string, secretHash: string): Promise<void>;
  /** The session whose secret hashes to `secretHash`, or `undefined`. */
  sessionOfSecret(secretHash: string): Promise<string | undefined>;
  /**
   * Where other processes append to the same store (PostgreSQL): calls `poke` whenever the
   * session may have new events, whoever appended them, and after a lost notification connection
   * is back; returns the stop. A poke carries no event: the reader reads `after` its last id.
   * Absent where one process owns the store (SQLite, memory), whose log hears its own appends.
   */
  watch?(sessionId: string, poke: () => void): () => void;
}

/** The chat module's tables (the lead registers them in `lib/store.ts` as `chat: chatMigrations`). */
export const chatMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE chat_sessions (
      session_id TEXT PRIMARY KEY,
      created_at TEXT NOT NULL,
      last_event_id INTEGER NOT NULL DEFAULT 0 CHECK (last_event_id >= 0)
    ) STRICT;
    CREATE TABLE chat_events (
      session_id TEXT NOT NULL REFERENCES chat_sessions (session_id),
      id INTEGER NOT NULL CHECK (id >= 1),
      at TEXT NOT NULL,
      type TEXT NOT NULL,
      body TEXT NOT NULL,
      PRIMARY KEY (session_id, id)
    ) STRICT;`,
  },
  {
    // Only the secret's hash is kept: whoever reads the file cannot open a browser's chat with it.
    // Sessions from before this table have no secret and can no longer be opened (fail closed).
    version: 2,
    sql: `CREATE TABLE chat_session_secrets (
      secret_hash TEXT PRIMARY KEY,
      session_id TEXT NOT NULL UNIQUE REFERENCES chat_sessions (session_id)
    ) STRICT;`,
  },
];

/** The chat store on the household's SQLite file (migrated with {@link chatMigrations}). */
export function createSqliteChatStore(database: Database.Database): ChatStore {
  const insertSession = database.prepare<[string, string]>(
    'INSERT OR IGNORE INTO chat_sessions (session_id, created_at) VALUES (?, ?)',
  );
  const findSession = database.prepare<[string], { one: number }>(
    'SELECT 1 AS one FROM chat_sessions WHERE session_id = ?',
  );
  const nextId = database.prepare<[string], { id: number }>(
    'UPDATE chat_sessions SET last_event_id = last_event_id + 1 WHERE session_id = ? RETURNING last_event_id AS id',
  );
  const insertEvent = database.prepare<[string, number, string, string, string]>(
    'INSERT INTO chat_events (session_id, id, at, type, body) VALUES (?, ?, ?, ?, ?)',
  );
  const selectAfter = database.prepare<[string, number], { id: number; at: string; body: string }>(
    'SELECT id, at, body FROM chat_events WHERE session_id = ? AND id > ? ORDER BY id',
  );
  const insertSecret = database.prepare<[string, string]>(
    'INSERT INTO chat_session_secrets (secret_hash, session_id) VALUES (?, ?)',
  );
  const findSecret = database.prepare<[string], { session_id: string }>(
    'SELECT session_id FROM chat_session_secrets WHERE secret_hash = ?',
  );
  // The id and the row are written in one transaction: two appends never share an id or leave a hole.
  const appendRow = database.transaction((sessionId: string, body: ChatEventBody, at: string): ChatEvent => {
    const row = nextId.get(sessionId);
    if (row === undefined) throw new Error(`unknown chat session ${sessionId}`);
    insertEvent.run(sessionId, row.id, at, body.type, JSON.stringify(body));
    return { id: row.id, at, ...body };
  });
  return {
    async createSession(sessionId, at) {
      insertSession.run(sessionId, at);
    },
    async hasSession(sessionId) {
      return findSession.get(sessionId) !== undefined;
    },
    async append(sessionId, body, at) {
      return appendRow.immediate(sessionId, body, at);
    },
    async bindSecret(sessionId, secretHash) {
      insertSecret.run(secretHash, sessionId);
    },
    async sessionOfSecret(secretHash) {
      return findSecret.get(secretHash)?.session_id;
    },
    async after(sessionId, afterId) {
      // Rows are only ever written by `append` above from typed bodies: the store's own bytes.
      return selectAfter
        .all(sessionId, afterId)
        .map((row) => ({ id: row.id, at: row.at, ...(JSON.parse(row.body) as ChatEventBody) }));
    },
  };
}

/** A chat store in memory: for tests and for a process without a data folder. */
export function createMemoryChatStore(): ChatStore {
  const sessions = new Map<string, ChatEvent[]>();
  const secrets = new Map<string, string>();
  return {
    async bindSecret(sessionId, secretHash) {
      if (!sessions.has(sessionId)) throw new Error(`unknown chat session ${sessionId}`);
      if (secrets.has(secretHash) || [...secrets.values()].includes(sessionId)) {
        throw new Error('a chat session has one secret, and a secret one session');
      }
      secrets.set(secretHash, sessionId);
    },
    async sessionOfSecret(secretHash) {
      return secrets.get(secretHash);
    },
    async createSession(sessionId) {
      if (!sessions.has(sessionId)) sessions.set(sessionId, []);
    },
    async hasSession(sessionId) {
      return sessions.has(sessionId);
    },
    async append(sessionId, body, at) {
      const events = sessions.get(sessionId);
      if (events === undefined) throw new Error(`unknown chat session ${sessionId}`);
      const event: ChatEvent = { id: events.length + 1, at, ...body };
      events.push(event);
      return event;
    },
    async after(sessionId, afterId) {
      return (sessions.get(sessionId) ?? []).filter((event) => event.id > afterId);
    },
  };
}
