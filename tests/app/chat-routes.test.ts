import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { POST as answerElicitation } from '../../app/api/chat/elicitation/route';
import { GET as events } from '../../app/api/chat/events/route';
import { POST as sendMessage } from '../../app/api/chat/messages/route';
import { POST as openSession } from '../../app/api/chat/session/route';
import { GET as mcpGet, POST as mcpPost } from '../../app/mcp/route';
import { maxChatBodyBytes, setHouseholdApp } from '../../lib/index';
import { createFakeApp, createFakeChat, type FakeChat, readEvents, request } from './fake-chat';

// The chat's route handlers called directly with `Request`s, over a fake ChatService: every
// refusal is a 4xx with words and leaves the service untouched (no call recorded).
let chat: FakeChat;
beforeEach(() => {
  chat = createFakeChat();
  setHouseholdApp(createFakeApp(chat));
});
afterEach(() => setHouseholdApp(undefined));

async function errorOf(response: Response): Promise<string> {
  return ((await response.json()) as { error: string }).error;
}

/** A session the way a page gets one: the secret the server hands it once. */
async function sessionToken(): Promise<string> {
  const response = await openSession(request('/api/chat/session'));
  expect(response.status).toBe(200);
  return ((await response.json()) as { token: string }).token;
}

/** A well-formed secret that opens no session. */
const forgedToken = 'A'.repeat(43);

/** A body stream of `size` bytes with no Content-Length: the cap must hold while reading. */
function streamOf(size: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= size) return controller.close();
      const chunk = new Uint8Array(Math.min(4096, size - sent)).fill(0x20);
      sent += chunk.byteLength;
      controller.enqueue(chunk);
    },
  });
}

describe('POST /api/chat/session', () => {
  it('starts a session and hands its secret to the page in the body, never in a cookie; the secret resumes it', async () => {
    const first = await openSession(request('/api/chat/session'));
    expect(first.status).toBe(200);
    const opened = (await first.json()) as { resumed: boolean; token: string };
    expect(opened).toMatchObject({ resumed: false, planner: { kind: 'offline' } });
    expect(opened.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(first.headers.get('set-cookie')).toBeNull();

    const again = await openSession(request('/api/chat/session', { token: opened.token }));
    const resumed = (await again.json()) as { resumed: boolean; token?: string };
    expect(resumed).toMatchObject({ resumed: true });
    // The secret is handed out once, when the session starts.
    expect(resumed.token).toBeUndefined();
    expect(chat.calls).toEqual(['createSession']);
  });

  it('a secret naming no live session (a forged one, or from an earlier version) gets a new session', async () => {
    const response = await openSession(request('/api/chat/session', { token: forgedToken }));
    const body = (await response.json()) as { resumed: boolean; token: string };
    expect(body).toMatchObject({ resumed: false });
    expect(body.token).not.toBe(forgedToken);
  });

  it('a cookie opens nothing: another port of this host could have planted it', async () => {
    const token = await sessionToken();
    const response = await openSession(request('/api/chat/session', { cookie: `emcp-chat=${token}` }));
    expect(await response.json()).toMatchObject({ resumed: false });
    expect(chat.calls).toEqual(['createSession', 'createSession']);
  });

  it.each([
    ['a missing Origin', { origin: null }, 403, 'missing Origin header'],
    ['a foreign Origin', { origin: 'http://evil.example' }, 403, 'requests from http://evil.example are not accepted'],
    ['malformed JSON', { body: '{"oops"' }, 400, 'the body must be a JSON object'],
    ['unknown fields', { body: '{"sessionId":"mine"}' }, 400, 'invalid request'],
  ] as const)('refuses %s and creates nothing', async (_name, init, status, message) => {
    const response = await openSession(request('/api/chat/session', init));
    expect(response.status).toBe(status);
    expect(await errorOf(response)).toContain(message);
    expect(chat.calls).toEqual([]);
  });
});

describe('POST /api/chat/messages', () => {
  it('hands the text to the chat service and answers at once', async () => {
    const token = await sessionToken();
    const response = await sendMessage(
      request('/api/chat/messages', { token, body: '{"text":"  a large pepperoni "}' }),
    );
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ accepted: true });
    expect(chat.calls).toEqual(['createSession', 'send:a large pepperoni']);
  });

  it('a message the service refuses (a turn is running) is a 409 with its reason', async () => {
    const token = await sessionToken();
    chat.refuseSends('The agent is still working on the previous message.');
    const response = await sendMessage(request('/api/chat/messages', { token, body: '{"text":"hi"}' }));
    expect(response.status).toBe(409);
    expect(await errorOf(response)).toBe('The agent is still working on the previous message.');
  });

  const oversized = JSON.stringify({ text: 'x'.repeat(maxChatBodyBytes) });
  it.each([
    ['a missing Origin', { origin: null }, 403, 'missing Origin header'],
    ['a foreign Origin', { origin: 'https://localhost:3000' }, 403, 'are not accepted'],
    ['no session secret', { token: '' }, 401, 'no chat session'],
    ['a forged session secret', { token: forgedToken }, 401, 'no chat session'],
    ['a malformed secret', { token: '../../etc' }, 401, 'no chat session'],
    ['malformed JSON', { body: '{"text": "hi"' }, 400, 'the body must be a JSON object'],
    ['a JSON array', { body: '["hi"]' }, 400, 'the body must be a JSON object'],
    ['a wrong type', { body: '{"text": 42}' }, 400, 'text: Invalid input: expected string'],
    ['an empty message', { body: '{"text": "   "}' }, 400, 'write a message first'],
    ['an unknown field', { body: '{"text": "hi", "role": "parent"}' }, 400, 'invalid request'],
    ['no body', { body: '' }, 400, 'text'],
    ['an oversized body', { body: oversized }, 413, `larger than ${maxChatBodyBytes} bytes`],
  ] as const)('refuses %s without sending anything', async (_name, init, status, message) => {
    const token = 'token' in init ? init.token : await sessionToken();
    const response = await sendMessage(request('/api/chat/messages', { body: '{"text":"hi"}', ...init, token }));
    expect(response.status).toBe(status);
    expect(await errorOf(response)).toContain(message);
    expect(chat.calls.filter((call) => call.startsWith('send'))).toEqual([]);
  });

  it('a header that cannot be a secret never reaches the service', async () => {
    const response = await sendMessage(request('/api/chat/messages', { token: '../../etc', body: '{"text":"hi"}' }));
    expect(response.status).toBe(401);
    expect(chat.asked).toEqual([]);
  });

  it('an oversized body without Content-Length is refused while it is read', async () => {
    const token = await sessionToken();
    const response = await sendMessage(request('/api/chat/messages', { token, body: streamOf(maxChatBodyBytes + 1) }));
    expect(response.status).toBe(413);
    expect(chat.calls.filter((call) => call.startsWith('send'))).toEqual([]);
  });

  it('a body that is not UTF-8 is a 400', async () => {
    const token = await sessionToken();
    const bytes = new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes);
        controller.close();
      },
    });
    const response = await sendMessage(request('/api/chat/messages', { token, body }));
    expect(response.status).toBe(400);
    expect(await errorOf(response)).toBe('the body is not UTF-8');
  });
});

describe('GET /api/chat/events', () => {
  it('streams the session as SSE with id lines, and resumes after Last-Event-ID', async () => {
    const token = await sessionToken();
    await sendMessage(request('/api/chat/messages', { token, body: '{"text":"a cheese slice"}' }));
    const sessionId = (await chat.sessionOf(token)) as string;
    chat.push(sessionId, { type: 'assistant-text', messageId: 'm1', delta: 'Looking at the menu' });

    const response = await events(request('/api/chat/events', { method: 'GET', token }));
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const firstTwo = await readEvents(response, (seen) => seen.length >= 2);
    expect(firstTwo.map(({ id, data }) => [id, data.type])).toEqual([
      ['1', 'user-message'],
      ['2', 'assistant-text'],
    ]);
    expect(firstTwo[0]?.data).toMatchObject({ id: 1, type: 'user-message', text: 'a cheese slice' });

    // A reconnect names the last id it saw; only what came after is sent, live ones included.
    const resumed = await events(
      request('/api/chat/events', { method: 'GET', token, headers: { 'last-event-id': '1' } }),
    );
    const reading = readEvents(resumed, (seen) => seen.length >= 2);
    chat.push(sessionId, { type: 'turn-ended', reason: 'done' });
    expect((await reading).map(({ id, data }) => [id, data.type])).toEqual([
      ['2', 'assistant-text'],
      ['3', 'turn-ended'],
    ]);
  });

  it.each([
    ['no session secret', { token: '' }, 401, 'no chat session'],
    ['a Last-Event-ID that is no event id', { headers: { 'last-event-id': '-1' } }, 400, 'Last-Event-ID'],
    ['a ?after= that is no event id', { path: '/api/chat/events?after=abc' }, 400, 'Last-Event-ID'],
  ] as const)('refuses %s', async (_name, init, status, message) => {
    const token = 'token' in init ? init.token : await sessionToken();
    const path = 'path' in init ? init.path : '/api/chat/events';
    const headers = 'headers' in init ? init.headers : {};
    const response = await events(request(path, { method: 'GET', token, headers }));
    expect(response.status).toBe(status);
    expect(await errorOf(response)).toContain(message);
  });
});

describe('POST /api/chat/elicitation', () => {
  it('passes an accepted form with its content to the service', async () => {
    const token = await sessionToken();
    const body = JSON.stringify({ elicitationId: 'form-1', action: 'accept', content: { deliverTo: '12 Main St' } });
    const response = await answerElicitation(request('/api/chat/elicitation', { token, body }));
    expect(response.status).toBe(200);
    expect(chat.calls).toContain('answer:form-1:accept:{"deliverTo":"12 Main St"}');
  });

  it('a form that is not waiting is a 409 with the reason', async () => {
    const token = await sessionToken();
    const body = JSON.stringify({ elicitationId: 'form-9', action: 'decline' });
    const response = await answerElicitation(request('/api/chat/elicitation', { token, body }));
    expect(response.status).toBe(409);
    expect(await errorOf(response)).toContain('not waiting');
  });

  it.each([
    ['a foreign Origin', { origin: 'http://localhost:3001' }, 403],
    ['no session secret', { token: '' }, 401],
    ['an unknown action', { body: '{"elicitationId":"form-1","action":"approve"}' }, 400],
    ['accept without content', { body: '{"elicitationId":"form-1","action":"accept"}' }, 400],
    ['content that is not strings', { body: '{"elicitationId":"form-1","action":"accept","content":{"n":1}}' }, 400],
  ] as const)('refuses %s without answering the form', async (_name, init, status) => {
    const token = 'token' in init ? init.token : await sessionToken();
    const body = 'body' in init ? init.body : '{"elicitationId":"form-1","action":"decline"}';
    const response = await answerElicitation(request('/api/chat/elicitation', { ...init, token, body }));
    expect(response.status).toBe(status);
    expect(chat.calls.filter((call) => call.startsWith('answer'))).toEqual([]);
  });
});

describe('/mcp without EXTENSIBLE_MCP_HTTP_TOKEN', () => {
  it('does not exist', async () => {
    const initialize = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} });
    expect((await mcpPost(request('/mcp', { body: initialize }))).status).toBe(404);
    expect((await mcpGet(request('/mcp', { method: 'GET' }))).status).toBe(404);
  });
});
