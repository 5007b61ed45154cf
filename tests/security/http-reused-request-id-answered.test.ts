/**
 * Issue 11 item 18: a JSON-RPC request id reused in one HTTP session while the first request was
 * still running took over the first one's answer stream, and the first request never got an
 * answer. Both are answered now: the second with an error naming the id, the first normally.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupStack } from '../gateway/support';
import { openRawSession, rawPost, servedWithHeldTool, startHeldCall } from './fixtures/held-calls';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

describe('a reused request id over Streamable HTTP', () => {
  it('answers both requests: the reuse with an error, the first with its result', async () => {
    const { endpoint, held } = await servedWithHeldTool(cleanups);
    const session = await openRawSession(endpoint.url);
    const sessionId = session.sessionId as string;

    const first = await startHeldCall(endpoint.url, { sessionId, id: 7, label: 'first' });
    await held.started(1);
    // Same id, same session, while the first is still in flight.
    const second = await rawPost(endpoint.url, { jsonrpc: '2.0', id: 7, method: 'tools/list' }, { sessionId });
    expect(second.messages).toEqual([
      expect.objectContaining({
        id: 7,
        error: expect.objectContaining({ message: expect.stringMatching(/already in use/) }),
      }),
    ]);

    held.release();
    const answer = await first.answer;
    expect(answer.status).toBe(200);
    expect(answer.messages).toEqual([expect.objectContaining({ id: 7, result: expect.anything() })]);
    expect(answer.body).toContain('held first');

    // Once answered, the id may be used again.
    const reused = await rawPost(endpoint.url, { jsonrpc: '2.0', id: 7, method: 'tools/list' }, { sessionId });
    expect(reused.messages).toEqual([expect.objectContaining({ id: 7, result: expect.anything() })]);
  });

  it('refuses a batch that repeats an id within itself', async () => {
    const { endpoint } = await servedWithHeldTool(cleanups);
    const { sessionId } = await openRawSession(endpoint.url);
    const batch = [
      { jsonrpc: '2.0', id: 9, method: 'tools/list' },
      { jsonrpc: '2.0', id: 9, method: 'tools/list' },
    ];
    const answer = await rawPost(endpoint.url, batch, { sessionId: sessionId as string });
    expect(answer.messages).toEqual([expect.objectContaining({ id: 9, error: expect.anything() })]);
  });
});
