import { describe, expect, it } from 'vitest';
import { createChatLog } from './chat-log';
import { type ChatStore, createMemoryChatStore } from './chat-store';
import type { ChatEvent } from './types';

describe('the chat log', () => {
  it('yields stored events then live ones, with no gap and no duplicate when appends race the read', async () => {
    const store = createMemoryChatStore();
    await store.createSession('s', '2030-01-01T00:00:00.000Z');
    // A store whose read is slow enough that appends land between subscribing and reading.
    let appendDuringRead: (() => Promise<unknown>) | undefined;
    const racing: ChatStore = {
      ...store,
      async after(sessionId, afterId) {
        await appendDuringRead?.();
        return store.after(sessionId, afterId);
      },
    };
    const log = createChatLog(racing);
    for (const text of ['one', 'two', 'three']) await log.append('s', { type: 'user-message', text });
    appendDuringRead = () => log.append('s', { type: 'user-message', text: 'four' });

    const controller = new AbortController();
    const seen: ChatEvent[] = [];
    for await (const event of log.events('s', { afterId: 1, signal: controller.signal })) {
      seen.push(event);
      if (event.id === 4) void log.append('s', { type: 'turn-ended', reason: 'done' });
      if (event.id === 5) controller.abort();
    }
    expect(seen.map((event) => event.id)).toEqual([2, 3, 4, 5]);
    expect(seen.map((event) => event.type)).toEqual(['user-message', 'user-message', 'user-message', 'turn-ended']);
  });

  it('ends a waiting reader when its signal aborts', async () => {
    const store = createMemoryChatStore();
    await store.createSession('s', '2030-01-01T00:00:00.000Z');
    const log = createChatLog(store);
    const controller = new AbortController();
    const reading = (async () => {
      const seen: ChatEvent[] = [];
      for await (const event of log.events('s', { afterId: 0, signal: controller.signal })) {
        seen.push(event);
        controller.abort();
      }
      return seen;
    })();
    await log.append('s', { type: 'turn-started' });
    expect((await reading).map((event) => event.type)).toEqual(['turn-started']);
  });

  it('keeps appends of one session in call order, ids ascending', async () => {
    const store = createMemoryChatStore();
    await store.createSession('s', '2030-01-01T00:00:00.000Z');
    const log = createChatLog(store);
    const appended = await Promise.all(
      Array.from({ length: 20 }, (_, index) => log.append('s', { type: 'user-message', text: String(index) })),
    );
    expect(appended.map((event) => (event.type === 'user-message' ? Number(event.text) : -1))).toEqual(
      appended.map((event) => event.id - 1),
    );
  });
});
