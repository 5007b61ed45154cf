import { LRUCache } from 'lru-cache';

/**
 * Remembers which tools each discovery scope has discovered (SPEC §3.5), by scope key
 * ({@link scopeKey}: a digest of principal and carrier, never a raw id). Async and behind an
 * interface so a shared store serves several proxy instances (SPEC §11); every implementation
 * passes one contract suite. Bounded and timed: forgetting must only ever deny.
 */
export interface DiscoveryStore {
  /** Adds `names` to the scope (creating it) and sets its expiry to now + the store's time limit. */
  remember(scope: string, names: readonly string[]): Promise<void>;
  /** Whether the scope is live and holds `name`. */
  has(scope: string, name: string): Promise<boolean>;
  /** Whether the scope exists and has not expired. */
  live(scope: string): Promise<boolean>;
  /** Releases what the store holds open (a database file); the owner's to call. */
  close(): Promise<void>;
}

/** The bounds every discovery store keeps (SPEC §3.5). */
export interface DiscoveryLimits {
  /** How long a scope lives after the last search that added to it. Default one hour. */
  readonly ttlMs?: number;
  /** Names kept per scope; the oldest are forgotten first. Default 1 000. */
  readonly maxNamesPerScope?: number;
  /** Scopes kept; the least recently searched are forgotten first. Default 10 000 in memory. */
  readonly maxScopes?: number;
  /** Milliseconds since the epoch; tests inject a clock. */
  readonly now?: () => number;
}

/** The defaults of {@link DiscoveryLimits}. */
export const defaultDiscoveryLimits = { ttlMs: 60 * 60_000, maxNamesPerScope: 1_000, maxScopes: 10_000 } as const;

interface MemoryScope {
  expiresAt: number;
  /** Names in the order they were (last) added: a Map keeps insertion order. */
  readonly names: Map<string, true>;
}

/** An in-process discovery store: bounded (least recently searched scope forgotten first) and timed. */
export function memoryDiscoveryStore(limits: DiscoveryLimits = {}): DiscoveryStore {
  const ttlMs = limits.ttlMs ?? defaultDiscoveryLimits.ttlMs;
  const maxNames = limits.maxNamesPerScope ?? defaultDiscoveryLimits.maxNamesPerScope;
  const now = limits.now ?? Date.now;
  const scopes = new LRUCache<string, MemoryScope>({ max: limits.maxScopes ?? defaultDiscoveryLimits.maxScopes });
  /** The scope, if live; `peek` so a check never counts as use (only a search refreshes a scope). */
  const liveScope = (scope: string): MemoryScope | undefined => {
    const found = scopes.peek(scope);
    if (found === undefined || found.expiresAt <= now()) return undefined;
    return found;
  };
  return {
    async remember(scope, names) {
      const found = liveScope(scope) ?? { expiresAt: 0, names: new Map<string, true>() };
      found.expiresAt = now() + ttlMs;
      for (const name of names) {
        found.names.delete(name);
        found.names.set(name, true);
      }
      for (const oldest of found.names.keys()) {
        if (found.names.size <= maxNames) break;
        found.names.delete(oldest);
      }
      scopes.set(scope, found);
    },
    async has(scope, name) {
      return liveScope(scope)?.names.has(name) === true;
    },
    async live(scope) {
      return liveScope(scope) !== undefined;
    },
    async close() {
      scopes.clear();
    },
  };
}
