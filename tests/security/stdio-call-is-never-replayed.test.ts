import { afterEach, describe, expect, it } from 'vitest';
import { connectInMemory, type ProxyEvent } from '../../proxy/index';
import { cleanupStack, mortalFixture, startedGateway, waitableLogger } from '../gateway/support';
import { callTool, searchNames, textOf } from '../proxy/helpers';

// SPEC §3.2 / §3.12: a stdio child that dies while a call is running. The call may have run, so
// it is reported as "outcome unknown" and never retried; the next call restarts the child.
const cleanups = cleanupStack();
afterEach(() => cleanups.run());

describe('a stdio downstream that dies mid-call', () => {
  it('reports the outcome as unknown, never replays the call, and the next call restarts the child', async () => {
    const mortal = mortalFixture(cleanups);
    const events: ProxyEvent[] = [];
    const logger = waitableLogger();
    const gateway = await startedGateway(cleanups, {
      servers: { mortal: mortal.spec },
      logger,
      onEvent: (event) => events.push(event),
    });
    const client = await connectInMemory(gateway, { principal: { id: 'test' } });
    cleanups.push(() => client.close());
    expect(await searchNames(client, 'does one unit of work')).toContain('mortal__work');
    const [firstPid] = mortal.starts();

    const lost = await callTool(client, 'mortal__work', { label: 'transfer-1', die: true });
    expect(lost.isError).toBe(true);
    expect(textOf(lost)).toMatch(/lost its connection while running "work"/);
    expect(textOf(lost)).toMatch(/outcome is unknown/);
    expect(textOf(lost)).toMatch(/not retried/);
    // The tool ran exactly once: no replay, neither on the dead connection nor on a restarted child.
    expect(mortal.calls()).toEqual(['transfer-1']);
    expect(mortal.starts()).toEqual([firstPid]);
    expect(events.find((event) => event.filter === 'dispatch')).toMatchObject({
      pipeline: 'call',
      tool: 'mortal__work',
      decision: 'error',
    });
    expect(logger.lines).toContain('server "mortal": connection lost during "work"; not retried');

    const next = await callTool(client, 'mortal__work', { label: 'transfer-2' });
    expect(next.isError).toBeUndefined();
    const starts = mortal.starts();
    expect(starts).toHaveLength(2);
    expect(starts[1]).not.toBe(firstPid);
    expect(textOf(next)).toBe(`done transfer-2 by ${starts[1]}`);
    expect(mortal.calls()).toEqual(['transfer-1', 'transfer-2']);
  });
});
