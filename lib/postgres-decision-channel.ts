import type pg from 'pg';
import { listenPostgresChannel } from '../proxy/index';

/**
 * The channel every change of an approval request or a call-approval request notifies, in the
 * statement that changes it, with the request's id as the payload (never the decision).
 */
export const decisionChannel = 'approval_decisions';

/**
 * The SQL that runs `update` (an `UPDATE … RETURNING <id column> AS id`) and notifies
 * {@link decisionChannel} with the id of each row it changed, in one statement: the notification
 * goes out at commit and only then, and the result has one row per row changed.
 */
export function notifyingDecision(update: string): string {
  return `WITH changed AS (${update}) SELECT pg_notify('${decisionChannel}', id) FROM changed`;
}

/** Options of {@link createPostgresDecisionChannel}. */
export interface PostgresDecisionChannelOptions {
  /** A listener connection that failed; the channel reconnects and pokes every watcher. */
  readonly onError?: (error: unknown) => void;
  /** The listener's state: `listening` once `LISTEN` is in place, `lost` when its connection died. */
  readonly onListener?: (state: 'listening' | 'lost') => void;
  /** Milliseconds before the listener's first reconnect, doubled per failure up to `max` (default 100 and 5000). */
  readonly reconnect?: { readonly first: number; readonly max: number };
}

/** Who waits on which request, on this instance, for a change another instance (or this one) commits. */
export interface PostgresDecisionChannel {
  /**
   * Calls `poke` whenever a change of request `id` commits, through any instance, and whenever the
   * listener (re)connects (a change may have committed while nobody listened); returns the stop.
   * A new watcher is poked once the listener is in place for it, at once when it already is: a
   * change that committed just before the watch began was announced to nobody. A poke only says
   * "read the store again".
   */
  watch(id: string, poke: () => void): () => void;
}

/**
 * The decisions' live side on PostgreSQL (docs/scale-out.md, live events across instances): while
 * any wait of this instance watches a request, one dedicated connection listens on
 * {@link decisionChannel} (`listenPostgresChannel`) and pokes the watchers of the id named; after it
 * (re)connects it pokes every watcher, which read their request again. The order approvals and the
 * call approvals of one household share it, so an instance keeps one connection for both.
 */
export function createPostgresDecisionChannel(
  pool: pg.Pool,
  options: PostgresDecisionChannelOptions = {},
): PostgresDecisionChannel {
  const watchers = new Map<string, Set<() => void>>();
  let stopListening: (() => void) | undefined;
  /** Whether `LISTEN` is in place now. */
  let listening = false;
  const pokeAll = () => {
    for (const set of [...watchers.values()]) for (const poke of [...set]) poke();
  };
  return {
    watch(id, poke) {
      const set = watchers.get(id) ?? new Set();
      watchers.set(id, set);
      // A fresh function per watch, so one caller watching twice is two watchers.
      const watcher = () => poke();
      set.add(watcher);
      stopListening ??= listenPostgresChannel(pool, {
        channel: decisionChannel,
        onNotification: (payload) => {
          for (const each of [...(watchers.get(payload) ?? [])]) each();
        },
        onState(state) {
          listening = state === 'listening';
          // Up (first, or back after a loss): what committed meanwhile is read now.
          if (listening) pokeAll();
          options.onListener?.(state);
        },
        ...(options.onError === undefined ? {} : { onError: options.onError }),
        ...(options.reconnect === undefined ? {} : { reconnect: options.reconnect }),
      });
      if (listening) watcher();
      let stopped = false;
      return () => {
        if (stopped) return;
        stopped = true;
        set.delete(watcher);
        if (set.size === 0) watchers.delete(id);
        if (watchers.size > 0) return;
        stopListening?.();
        stopListening = undefined;
        listening = false;
      };
    },
  };
}
