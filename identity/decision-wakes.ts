/** A store's live side: `poke` whenever a change of request `id` commits, through any instance; returns the stop. */
export type WatchRequest = (id: string, poke: () => void) => () => void;

/** One wait's wakes: how many came, a sleep that ends at the next one, and the stop. */
export interface DecisionWake {
  /** Wakes so far: read it before reading the store, and hand it to {@link sleep}. */
  readonly count: number;
  /**
   * Resolves after `ms`, or at the next wake; at once when a wake came since `since` (a decision
   * committed while the store was being read is never slept through).
   */
  sleep(ms: number, since: number): Promise<void>;
  /** Stops listening for this wait's request. */
  close(): void;
}

/** Where the waits of one process hear that a request may have been decided. */
export interface DecisionWakes {
  /** A decision on `id` was taken in this process: its waiters read the store again now. */
  notify(id: string): void;
  /**
   * Opens the wakes of one wait on request `id`: local decisions and `signal`'s abort at once, the
   * store's watch from its first sleep on (a wait decided at its first read listens to nothing).
   */
  open(id: string, signal?: AbortSignal): DecisionWake;
}

/**
 * The wakes of the approval waits (order approvals and call approvals alike): a decision taken in
 * this process wakes its waiters at once, and so does one another instance commits when the store
 * has a `watch` (PostgreSQL notifies it, docs/scale-out.md); the waiter's poll of the store is the
 * fallback for a store without one. Each wait counts its wakes, so a wake that arrives while it
 * reads the store makes it read again instead of being slept through. The store's watch starts at
 * the first sleep, after the first read: it must poke the new watcher once it listens (at once when
 * it already does), so a decision committed between that read and the watch is read too.
 */
export function createDecisionWakes(watch?: WatchRequest): DecisionWakes {
  const waiters = new Map<string, Set<() => void>>();
  return {
    notify(id) {
      for (const wake of [...(waiters.get(id) ?? [])]) wake();
    },
    open(id, signal) {
      let count = 0;
      let resume: (() => void) | undefined;
      const wake = () => {
        count += 1;
        resume?.();
      };
      const set = waiters.get(id) ?? new Set();
      waiters.set(id, set);
      set.add(wake);
      let unwatch: (() => void) | undefined;
      signal?.addEventListener('abort', wake);
      return {
        get count() {
          return count;
        },
        sleep(ms, since) {
          unwatch ??= watch?.(id, wake);
          if (count !== since || signal?.aborted) return Promise.resolve();
          return new Promise<void>((resolve) => {
            const done = () => {
              clearTimeout(timer);
              resume = undefined;
              resolve();
            };
            const timer = setTimeout(done, ms);
            resume = done;
          });
        },
        close() {
          set.delete(wake);
          if (set.size === 0 && waiters.get(id) === set) waiters.delete(id);
          unwatch?.();
          unwatch = undefined;
          signal?.removeEventListener('abort', wake);
        },
      };
    },
  };
}
