import { LRUCache } from 'lru-cache';

/**
 * Remembers which tools each MCP session has discovered. Behind an interface so a shared
 * store can serve several proxy instances (SPEC §11); forgetting must only ever deny.
 */
export interface DiscoveryStore {
  remember(session: string, names: readonly string[]): void | Promise<void>;
  has(session: string, name: string): boolean | Promise<boolean>;
}

/** Bounds for {@link memoryDiscoveryStore}. */
export interface MemoryDiscoveryStoreOptions {
  /** Sessions kept; the least recently used is forgotten first. */
  readonly maxSessions?: number;
  /** Tools kept per session; the least recently used is forgotten first. */
  readonly maxToolsPerSession?: number;
}

/** An in-process, bounded (LRU) discovery store. */
export function memoryDiscoveryStore(options: MemoryDiscoveryStoreOptions = {}): DiscoveryStore {
  const maxToolsPerSession = options.maxToolsPerSession ?? 1_000;
  const sessions = new LRUCache<string, LRUCache<string, true>>({ max: options.maxSessions ?? 10_000 });
  return {
    remember(session, names) {
      let known = sessions.get(session);
      if (!known) {
        known = new LRUCache<string, true>({ max: maxToolsPerSession });
        sessions.set(session, known);
      }
      for (const name of names) known.set(name, true);
    },
    has(session, name) {
      return sessions.get(session)?.get(name) === true;
    },
  };
}
