import type { ChatStore } from './chat-store';
import type { ChatEvent, ChatEventBody } from './types';

/** A session's event log: durable appends fanned out live to every reader. */
export interface ChatLog {
  /** Stores the event (its id is the next of the session), then hands it to every live reader. */
  append(sessionId: string, body: ChatEventBody): Promise<ChatEvent>;
  /** Stored events after `afterId`, then live ones, without gaps or duplicates, until `signal` aborts. */
  events(
    sessionId: string,
    options: { readonly afterId: number; readonly signal: AbortSignal },
  ): AsyncIterable<ChatEvent>;
}

/**
 * Creates the log over a store. Appends of one session are serialised in this process, and across
 * processes by the store (PostgreSQL's row lock on the session), so ids follow commit order. A
 * reader subscribes (and watches the store, where it can be shared) before it reads the store and
 * drops ids it has already yielded, so an event written between the two is neither lost nor
 * repeated; events another instance appended reach it when the store pokes, or when a local id
 * skips theirs, and are read from the store by id.
 */
export function createChatLog(store: ChatStore, clock: () => Date = () => new Date()): ChatLog {
  const listeners = new Map<string, Set<(event: ChatEvent) => void>>();
  const tails = new Map<string, Promise<unknown>>();

  function subscribe(sessionId: string, listener: (event: ChatEvent) => void): () => void {
    const set = listeners.get(sessionId) ?? new Set();
    listeners.set(sessionId, set);
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) listeners.delete(sessionId);
    };
  }

  return {
    append(sessionId, body) {
      const previous = tails.get(sessionId) ?? Promise.resolve();
      const appended = previous
        .catch(() => undefined)
        .then(async () => {
          const event = await store.append(sessionId, body, clock().toISOString());
          for (const listener of listeners.get(sessionId) ?? []) listener(event);
          return event;
        });
      tails.set(sessionId, appended);
      void appended.finally(() => {
        if (tails.get(sessionId) === appended) tails.delete(sessionId);
      });
      return appended;
    },

    async *events(sessionId, { afterId, signal }) {
      const queue: ChatEvent[] = [];
      // True while the store may hold events this reader has not yielded: at the start, after a
      // poke from the store's watch (another instance appended), and when a queued id skips one.
      let stale = true;
      let wake: (() => void) | undefined;
      const onAbort = () => wake?.();
      // 1. Subscribe first: anything appended from here on is queued, or announced by the store.
      const unsubscribe = subscribe(sessionId, (event) => {
        queue.push(event);
        wake?.();
      });
      const unwatch = store.watch?.(sessionId, () => {
        stale = true;
        wake?.();
      });
      signal.addEventListener('abort', onAbort);
      try {
        let last = afterId;
        while (!signal.aborted) {
          // 2. What the store holds after the last id yielded: ids per session have no holes, so
          // reading after `last` neither skips nor repeats one, whoever appended it.
          if (stale) {
            stale = false;
            for (const event of await store.after(sessionId, last)) {
              if (signal.aborted) return;
              if (event.id <= last) continue;
              yield event;
              last = event.id;
            }
            continue;
          }
          // 3. Then live events of this process, skipping any the store read already returned.
          const event = queue.shift();
          if (event === undefined) {
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
            wake = undefined;
            continue;
          }
          if (event.id <= last) continue;
          // Another instance appended the ids in between: the store has them (this one is committed).
          if (event.id > last + 1) {
            stale = true;
            continue;
          }
          yield event;
          last = event.id;
        }
      } finally {
        signal.removeEventListener('abort', onAbort);
        unwatch?.();
        unsubscribe();
      }
    },
  };
}
