import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChatHousehold, is, startChatHousehold } from './chat-household';

// Chat sessions are cheap to ask for (one POST), so the MCP sessions they hold are capped: beyond
// the cap the least recently used idle one is closed. A session whose turn is waiting for a
// passkey is never cut off, and a closed one works again on its next message.
let h: ChatHousehold;
beforeAll(async () => {
  h = await startChatHousehold({ maxLiveSessions: 2 });
});
afterAll(async () => {
  await h?.close();
});

describe('the live chat-session cap', () => {
  it('keeps a waiting turn alive past the cap, and reopens an evicted session on its next message', async () => {
    const waiting = await h.session();
    expect(await h.chat.send(waiting.sessionId, 'a cheese slice to 12 Main St')).toEqual({ accepted: true });
    const pending = await waiting.waitFor(is.approval('pending'));

    // Three more sessions: the cap is two, so idle ones are closed — never the waiting one.
    const idle = await h.session();
    await h.session();
    await h.session();

    await h.approve('child', pending.approvalId);
    expect((await waiting.waitFor(is.turnEnded)).reason).toBe('done');
    expect(waiting.events.filter(is.receipt).at(-1)).toMatchObject({ amountCents: 400 });

    // The first idle session was evicted; its next message opens a fresh MCP session and runs.
    expect(await h.chat.send(idle.sessionId, 'menu')).toEqual({ accepted: true });
    expect((await idle.waitFor(is.turnEnded)).reason).toBe('done');
    expect(idle.text()).toMatch(/Cheese slice/);
  });
});
