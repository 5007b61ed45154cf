/**
 * Issue 11 item 11 (proxy side): one client could hold every proxy session. Sessions are now
 * capped per remote address (the address's own least recently used idle session is closed to
 * make room), the global cap evicts the least recently used idle session instead of locking
 * everyone out, and a session with a request in flight is never evicted. Clients speak from
 * 127.0.0.2 and 127.0.0.3 to the proxy on 127.0.0.1.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupStack } from '../gateway/support';
import { openRawSession, rawPost, servedWithHeldTool, startHeldCall } from './fixtures/held-calls';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const attacker = '127.0.0.2';
const victim = '127.0.0.3';

async function listStatus(url: string, sessionId: string | undefined, localAddress: string): Promise<number> {
  const answer = await rawPost(
    url,
    { jsonrpc: '2.0', id: 50, method: 'tools/list' },
    {
      sessionId: sessionId as string,
      localAddress,
    },
  );
  return answer.status;
}

describe('proxy HTTP sessions under one greedy client', () => {
  it('caps sessions per remote address by evicting that address’s own least recently used idle one', async () => {
    const { endpoint } = await servedWithHeldTool(cleanups, { maxSessions: 10, maxSessionsPerAddress: 2 });
    const victimSession = await openRawSession(endpoint.url, victim);
    const opened = [];
    for (let count = 0; count < 5; count++) opened.push(await openRawSession(endpoint.url, attacker));
    expect(opened.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200]);

    // Only the attacker's two most recent sessions are left; the victim's (older than all of them) is untouched.
    const statuses = [];
    for (const answer of opened) statuses.push(await listStatus(endpoint.url, answer.sessionId, attacker));
    expect(statuses).toEqual([404, 404, 404, 200, 200]);
    expect(await listStatus(endpoint.url, victimSession.sessionId, victim)).toBe(200);
  });

  it('evicts the least recently used idle session at the global cap, never one with a request in flight', async () => {
    const { endpoint, held } = await servedWithHeldTool(cleanups, { maxSessions: 2, maxSessionsPerAddress: 2 });
    const busy = await openRawSession(endpoint.url, victim);
    const call = await startHeldCall(endpoint.url, {
      sessionId: busy.sessionId as string,
      id: 2,
      label: 'busy',
      localAddress: victim,
    });
    await held.started(1);
    const idle = await openRawSession(endpoint.url, attacker);

    // Full: the busy session (the least recently used) survives; the idle one makes room.
    const newcomer = await openRawSession(endpoint.url, attacker);
    expect(newcomer.status).toBe(200);
    expect(await listStatus(endpoint.url, idle.sessionId, attacker)).toBe(404);

    // Now both are busy: a further session is refused, not admitted by closing a running call.
    const second = await startHeldCall(endpoint.url, {
      sessionId: newcomer.sessionId as string,
      id: 3,
      label: 'second',
      localAddress: attacker,
    });
    await held.started(2);
    const refused = await openRawSession(endpoint.url, attacker);
    expect(refused.status).toBe(503);

    held.release();
    expect((await call.answer).body).toContain('held busy');
    expect((await second.answer).body).toContain('held second');
  });
});
