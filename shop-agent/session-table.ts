/** Limits on the shop's HTTP sessions (issue 11: one client must not lock everyone else out). */
export type SessionLimits = {
  /** Sessions held at once, all addresses together. */
  maxSessions: number;
  /** Sessions held at once by one remote address. */
  maxSessionsPerAddress: number;
  /** A session with no request for this long (and none in flight) is closed. */
  idleTimeoutMs: number;
};

/** Defaults: room for many households, a handful per client, half an hour of idleness. */
export const DEFAULT_SESSION_LIMITS: SessionLimits = {
  maxSessions: 1_000,
  maxSessionsPerAddress: 32,
  idleTimeoutMs: 30 * 60 * 1000,
};

/** One session's bookkeeping; `close` ends its transport (which then calls `remove`). */
export type SessionEntry<T> = {
  readonly session: T;
  readonly address: string;
  id: string | undefined;
  lastUsed: number;
  inFlight: number;
  close(): Promise<void>;
};

/** Why a new session was not admitted: the HTTP status and a message for the client. */
export type Admission<T> = { ok: true; entry: SessionEntry<T> } | { ok: false; status: 429 | 503; message: string };

/**
 * The shop's session table: idle expiry, a global cap and a per-address cap, each making room
 * by closing the least-recently-used IDLE session (one with a request in flight, such as an open
 * SSE stream, is never idle). When nothing idle can go, the new session is refused.
 */
export function createSessionTable<T>(options: {
  limits: SessionLimits;
  now: () => number;
  onEvicted?: (entry: SessionEntry<T>, why: 'idle-expired' | 'address-cap' | 'global-cap') => void;
}) {
  const { limits, now } = options;
  const entries = new Set<SessionEntry<T>>();
  const byId = new Map<string, SessionEntry<T>>();

  const evict = (entry: SessionEntry<T>, why: 'idle-expired' | 'address-cap' | 'global-cap') => {
    remove(entry);
    options.onEvicted?.(entry, why);
    void entry.close().catch(() => {});
  };
  const remove = (entry: SessionEntry<T>) => {
    entries.delete(entry);
    if (entry.id !== undefined && byId.get(entry.id) === entry) byId.delete(entry.id);
  };
  const leastRecentlyUsedIdle = (within: (entry: SessionEntry<T>) => boolean) => {
    let oldest: SessionEntry<T> | undefined;
    for (const entry of entries) {
      if (entry.inFlight > 0 || !within(entry)) continue;
      if (oldest === undefined || entry.lastUsed < oldest.lastUsed) oldest = entry;
    }
    return oldest;
  };

  return {
    /** Close every session idle for longer than the timeout. */
    sweep(): void {
      const cutoff = now() - limits.idleTimeoutMs;
      for (const entry of [...entries])
        if (entry.inFlight === 0 && entry.lastUsed <= cutoff) evict(entry, 'idle-expired');
    },

    /** Admit a new session for `address`, making room from idle sessions when a cap is reached. */
    admit(address: string, session: T, close: () => Promise<void>): Admission<T> {
      this.sweep();
      // Per-address cap first: a client at its cap only ever displaces its own idle sessions.
      let held = 0;
      for (const entry of entries) if (entry.address === address) held += 1;
      if (held >= limits.maxSessionsPerAddress) {
        const own = leastRecentlyUsedIdle((entry) => entry.address === address);
        if (own === undefined) {
          return { ok: false, status: 429, message: 'Too many sessions from this address; close one and retry' };
        }
        evict(own, 'address-cap');
      }
      if (entries.size >= limits.maxSessions) {
        const oldest = leastRecentlyUsedIdle(() => true);
        if (oldest === undefined) return { ok: false, status: 503, message: 'Too many sessions' };
        evict(oldest, 'global-cap');
      }
      const entry: SessionEntry<T> = { session, address, id: undefined, lastUsed: now(), inFlight: 0, close };
      entries.add(entry);
      return { ok: true, entry };
    },

    /** Record the id the transport assigned once the session initialised. */
    register(entry: SessionEntry<T>, id: string): void {
      if (!entries.has(entry)) return;
      entry.id = id;
      byId.set(id, entry);
    },

    /** The live session with this id, if any. */
    get(id: string): SessionEntry<T> | undefined {
      return byId.get(id);
    },

    /** Mark a request in flight; the returned function marks it done (call it exactly once). */
    begin(entry: SessionEntry<T>): () => void {
      entry.inFlight += 1;
      entry.lastUsed = now();
      let done = false;
      return () => {
        if (done) return;
        done = true;
        entry.inFlight -= 1;
        entry.lastUsed = now();
      };
    },

    remove,

    /** Every live session (for shutdown). */
    all(): SessionEntry<T>[] {
      return [...entries];
    },

    get size(): number {
      return entries.size;
    },
  };
}
