import type { AuditEntry, AuditHead, AuditListener } from './audit-log';
import { toAuditEntry } from './audit-rows';
import type { StoredAuditRow } from './check-audit-row';

/** Rows read per page while a subscriber catches up. */
const page = 500;

/** Options of {@link createAuditFeed}: how to read the shared table, and when the owner should watch it. */
export interface AuditFeedOptions {
  /** Up to `limit` stored rows with an id above `id`, in id order. */
  rows(id: number, limit: number): Promise<readonly StoredAuditRow[]>;
  head(): Promise<AuditHead>;
  /** Called with `true` when the first subscriber arrives and `false` when the last one leaves. */
  onActive?(active: boolean): void;
  /** A read that failed; the subscriber retries at the next {@link AuditFeed.poke}. */
  onError?(error: unknown): void;
}

/** Delivers the rows of a shared audit table to subscribers, whoever appended them. */
export interface AuditFeed {
  /**
   * Calls `listener` with every row above `after` (default: the head as read when the
   * subscription starts), in id order, each once; returns the unsubscribe.
   */
  subscribe(listener: AuditListener, after?: number): () => void;
  /**
   * New rows may be in the table (a notification, a reconnect, a poll): every subscriber reads after
   * its last row. `through`, when known, is the id the table holds rows up to: a subscriber already
   * given that row reads nothing.
   */
  poke(through?: number): void;
  /**
   * Rows this handle just committed, in id order: an idle subscriber whose last row is the one
   * before them is given them without a read; any other reads after its last row, as on a poke.
   */
  committed(entries: readonly AuditEntry[]): void;
}

interface Subscription {
  readonly listener: AuditListener;
  last: number | undefined;
  active: boolean;
  running: boolean;
  again: boolean;
}

/**
 * The live side of an audit log (SPEC §8, §11): a poke never carries a row, it only says "read
 * again", and each subscriber reads the table after the last id it was given. So a lost, late or
 * folded notification never leaves a gap, and a row is never delivered twice: ids are gap-free and
 * follow commit order, so a reader never sees an id before every smaller one.
 */
export function createAuditFeed(options: AuditFeedOptions): AuditFeed {
  const subscriptions = new Set<Subscription>();

  const give = (subscription: Subscription, entry: AuditEntry) => {
    try {
      subscription.listener(entry);
    } catch {
      // A failing reader (a closed SSE stream) must not starve the others. Readers report their own faults.
    }
  };

  const drain = async (subscription: Subscription): Promise<void> => {
    if (subscription.running) {
      subscription.again = true;
      return;
    }
    subscription.running = true;
    try {
      subscription.last ??= (await options.head()).rowId;
      do {
        subscription.again = false;
        for (;;) {
          const rows = await options.rows(subscription.last, page);
          for (const row of rows) {
            if (!subscription.active) return;
            subscription.last = row.id;
            // A row that no longer parses was edited outside the app: the verifier names it; readers skip it.
            const entry = toAuditEntry(row);
            if (entry !== undefined) give(subscription, entry);
          }
          if (rows.length < page || !subscription.active) break;
        }
      } while (subscription.again && subscription.active);
    } catch (error) {
      options.onError?.(error);
    } finally {
      subscription.running = false;
    }
  };

  return {
    subscribe(listener, after) {
      const subscription: Subscription = { listener, last: after, active: true, running: false, again: false };
      subscriptions.add(subscription);
      if (subscriptions.size === 1) options.onActive?.(true);
      void drain(subscription);
      return () => {
        if (!subscription.active) return;
        subscription.active = false;
        subscriptions.delete(subscription);
        if (subscriptions.size === 0) options.onActive?.(false);
      };
    },
    poke(through) {
      for (const subscription of subscriptions) {
        const given = !subscription.running && through !== undefined && (subscription.last ?? 0) >= through;
        if (!given) void drain(subscription);
      }
    },
    committed(entries) {
      const first = entries[0];
      if (first === undefined) return;
      for (const subscription of subscriptions) {
        if (subscription.running || subscription.last !== first.id - 1) {
          void drain(subscription);
          continue;
        }
        for (const entry of entries) {
          if (!subscription.active) break;
          subscription.last = entry.id;
          give(subscription, entry);
        }
      }
    },
  };
}
