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
 * Creates the log over a store. Appends of one session are serialised, so live readers see ids in
 * order; a reader subscribes before it reads the store and drops ids it has already yielded, so an
 * event written between the two is neither lost nor repeated.
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
      let wake: (() => void) | undefined;
      const onAbort = () => wake?.();
      // 1. Subscribe first: anything appended from here on is queued.
      const unsubscribe = subscribe(sessionId, (event) => {
        queue.push(event);
        wake?.();
      });
      signal.addEventListener('abort', onAbort);
      try {
        let last = afterId;
        // 2. Then what the store already holds.
        for (const event of await store.after(sessionId, afterId)) {
          if (signal.aborted) return;
          yield event;
          last = event.id;
        }
        // 3. Then live events, skipping any the store read already returned.
        while (!signal.aborted) {
          const event = queue.shift();
          if (event === undefined) {
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
            wake = undefined;
            continue;
          }
          if (event.id <= last) continue;
          yield event;
          last = event.id;
        }
      } finally {
        signal.removeEventListener('abort', onAbort);
        unsubscribe();
      }
    },
  };
}
