import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type CallFilter,
  connectInMemory,
  type Dispatch,
  type DispatchOutcome,
  type Gateway,
  type GatewayOptions,
} from '../../proxy/index';
import { createFixtureServer } from '../fixtures/fixture-server';
import { callTool, searchNames, textOf } from '../proxy/helpers';
import { cleanupStack, mortalFixture, startedGateway, waitableLogger } from './support';

// SPEC §3.12: call filters may wrap dispatch, seeing how the call ended, while still returning
// verdicts; a throwing wrap fails closed; a call that may have run is never replayed.
const cleanups = cleanupStack();
afterEach(() => cleanups.run());

type Wrap = (dispatch: Dispatch) => Promise<DispatchOutcome>;

/** A call filter that allows and wraps dispatch with `wrap`. */
function wrapping(name: string, wrap: Wrap): CallFilter {
  // A computed key names the function, so events and fail-closed reasons carry `name`.
  const named: Record<string, CallFilter> = { [name]: () => ({ decision: 'allow', wrap }) };
  return named[name] as CallFilter;
}

/** A wrap that records the outcome it saw and passes it on unchanged. */
function recordingWrap(seen: DispatchOutcome[]): CallFilter {
  return wrapping('settle', async (dispatch) => {
    const outcome = await dispatch();
    seen.push(outcome);
    return outcome;
  });
}

function answer(text: string): CallToolResult {
  return { content: [{ type: 'text', text }] };
}

interface FixtureCall {
  readonly tool: string;
  readonly args: unknown;
}

/** A gateway over the in-process fixture server; `filters` may read the calls the fixture received. */
async function setup(
  filters: readonly CallFilter[] | ((calls: readonly FixtureCall[]) => readonly CallFilter[]),
  options: Partial<GatewayOptions> = {},
) {
  const calls: FixtureCall[] = [];
  const gateway: Gateway = await startedGateway(cleanups, {
    servers: {
      fixture: {
        kind: 'in-process',
        server: createFixtureServer({ onCall: (tool, args) => calls.push({ tool, args }) }),
      },
    },
    extraCallFilters: typeof filters === 'function' ? filters(calls) : filters,
    ...options,
  });
  const client = await connectInMemory(gateway, { principal: { id: 'test' } });
  cleanups.push(() => client.close());
  return { client, calls };
}

describe('call filters that wrap dispatch', () => {
  it('a wrap sees the completed result after the downstream ran', async () => {
    const seen: { before: number; after: number; outcome: DispatchOutcome }[] = [];
    const { client } = await setup((calls) => [
      wrapping('settle', async (dispatch) => {
        const before = calls.length;
        const outcome = await dispatch();
        seen.push({ before, after: calls.length, outcome });
        return outcome;
      }),
    ]);
    await searchNames(client, 'echoes back the message');
    expect(textOf(await callTool(client, 'fixture__echo', { message: 'hi' }))).toBe('echo: hi');
    expect(seen).toEqual([
      {
        before: 0,
        after: 1,
        outcome: { status: 'completed', result: { content: [{ type: 'text', text: 'echo: hi' }] } },
      },
    ]);
  });

  it('composes outermost-first: the earlier filter wraps the later one and sees its outcome', async () => {
    const trace: string[] = [];
    let outerSaw: DispatchOutcome | undefined;
    const { client, calls } = await setup([
      wrapping('outer', async (dispatch) => {
        trace.push('outer before');
        outerSaw = await dispatch();
        trace.push('outer after');
        return outerSaw;
      }),
      wrapping('inner', async (dispatch) => {
        trace.push('inner before');
        const outcome = await dispatch();
        trace.push('inner after');
        return outcome.status === 'completed'
          ? { status: 'completed', result: answer(`inner saw: ${textOf(outcome.result)}`) }
          : outcome;
      }),
    ]);
    await searchNames(client, 'echoes back the message');
    expect(textOf(await callTool(client, 'fixture__echo', { message: 'x' }))).toBe('inner saw: echo: x');
    expect(trace).toEqual(['outer before', 'inner before', 'inner after', 'outer after']);
    expect(outerSaw).toEqual({ status: 'completed', result: answer('inner saw: echo: x') });
    expect(calls).toHaveLength(1);
  });

  it('a wrap that never calls dispatch answers instead, and the downstream records no call', async () => {
    const { client, calls } = await setup([
      wrapping('cached', async () => ({ status: 'completed', result: answer('from the cache') })),
    ]);
    await searchNames(client, 'echoes back the message');
    expect(textOf(await callTool(client, 'fixture__echo', { message: 'x' }))).toBe('from the cache');
    expect(calls).toEqual([]);
  });

  it('calling dispatch twice runs the downstream once and returns the same outcome', async () => {
    const outcomes: DispatchOutcome[] = [];
    const { client, calls } = await setup([
      wrapping('greedy', async (dispatch) => {
        outcomes.push(await dispatch());
        outcomes.push(await dispatch());
        return outcomes[1] as DispatchOutcome;
      }),
    ]);
    await searchNames(client, 'echoes back the message');
    expect(textOf(await callTool(client, 'fixture__echo', { message: 'once' }))).toBe('echo: once');
    expect(calls).toEqual([{ tool: 'echo', args: { message: 'once' } }]);
    expect(outcomes[1]).toBe(outcomes[0]);
  });

  it('a wrap that throws before dispatch refuses the call (fail closed); the downstream never ran', async () => {
    const { client, calls } = await setup([
      wrapping('brokenBefore', async () => {
        throw new Error('ledger offline: secret detail');
      }),
    ]);
    await searchNames(client, 'echoes back the message');
    const result = await callTool(client, 'fixture__echo', { message: 'x' });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/brokenBefore check failed.*fail closed/);
    expect(textOf(result)).not.toMatch(/secret detail/);
    expect(calls).toEqual([]);
  });

  it('a wrap that throws after dispatch reports the outcome as unknown, not as a refusal', async () => {
    const { client, calls } = await setup([
      wrapping('brokenAfter', async (dispatch) => {
        await dispatch();
        throw new Error('could not commit evidence');
      }),
    ]);
    await searchNames(client, 'echoes back the message');
    const result = await callTool(client, 'fixture__echo', { message: 'x' });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/brokenAfter check failed after the call was sent/);
    expect(textOf(result)).toMatch(/outcome is unknown/);
    expect(textOf(result)).not.toMatch(/fail closed/);
    expect(calls).toHaveLength(1);
  });

  it('a downstream timeout reaches the wrap as unknown', async () => {
    const seen: DispatchOutcome[] = [];
    const { client, calls } = await setup([recordingWrap(seen)], { callTimeoutMs: 200 });
    await searchNames(client, 'waits forever and never answers');
    const result = await callTool(client, 'fixture__hang');
    expect(calls).toEqual([{ tool: 'hang', args: {} }]);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.status).toBe('unknown');
    expect(seen[0]).toMatchObject({ reason: expect.stringMatching(/did not answer "hang" within 0\.2 s/) });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/outcome is unknown/);
  });

  it('a tool that vanished after discovery reaches the wrap as failed', async () => {
    const seen: DispatchOutcome[] = [];
    const fixture = createFixtureServer();
    const logger = waitableLogger();
    const transient = fixture.registerTool('transient', { description: 'A tool that will be withdrawn soon' }, () =>
      answer('still here'),
    );
    const gateway = await startedGateway(cleanups, {
      servers: { fixture: { kind: 'in-process', server: fixture } },
      logger,
      extraCallFilters: [recordingWrap(seen)],
    });
    const client = await connectInMemory(gateway, { principal: { id: 'test' } });
    cleanups.push(() => client.close());
    expect(await searchNames(client, 'tool that will be withdrawn')).toContain('fixture__transient');
    transient.remove();
    await logger.waitFor('tool list changed, re-indexed');
    const result = await callTool(client, 'fixture__transient');
    expect(seen).toEqual([{ status: 'failed', reason: expect.stringMatching(/Unknown tool "fixture__transient"/) }]);
    expect(result.isError).toBe(true);
    expect(textOf(result)).not.toMatch(/outcome is unknown/);
  });

  it('a downstream that cannot be reconnected reaches the wrap as failed', async () => {
    const seen: DispatchOutcome[] = [];
    const mortal = mortalFixture(cleanups, { maxStarts: 1 });
    const logger = waitableLogger();
    const gateway = await startedGateway(cleanups, {
      servers: { mortal: mortal.spec },
      logger,
      extraCallFilters: [recordingWrap(seen)],
    });
    const client = await connectInMemory(gateway, { principal: { id: 'test' } });
    cleanups.push(() => client.close());
    expect(await searchNames(client, 'does one unit of work')).toContain('mortal__work');
    // The child dies mid-call (outcome unknown); its restart is refused, so the next call cannot connect.
    await callTool(client, 'mortal__work', { label: 'first', die: true });
    const result = await callTool(client, 'mortal__work', { label: 'second' });
    expect(seen.map((outcome) => outcome.status)).toEqual(['unknown', 'failed']);
    expect(seen[1]).toMatchObject({ reason: expect.stringMatching(/Server "mortal" is unavailable/) });
    expect(result.isError).toBe(true);
    expect(mortal.calls()).toEqual(['first']);
    expect(mortal.starts()).toHaveLength(2);
  });
});

describe('a result that declares its outcome unknown', () => {
  it('reaches the wrap as unknown, never as completed, and the caller is told it may have run', async () => {
    const { McpServer } = await import('@modelcontextprotocol/server');
    const { outcomeMetaKey } = await import('../../proxy/index');
    const rail = new McpServer({ name: 'rail', version: '1.0.0' });
    let charges = 0;
    rail.registerTool('charge', { description: 'Charges a card on the payment rail' }, () => {
      charges += 1;
      return {
        content: [{ type: 'text', text: 'The payment rail did not answer in time.' }],
        isError: true,
        _meta: { [outcomeMetaKey]: 'unknown' },
      };
    });
    const seen: DispatchOutcome[] = [];
    const gateway = await startedGateway(cleanups, {
      servers: { rail: { kind: 'in-process', server: rail } },
      extraCallFilters: [recordingWrap(seen)],
    });
    const client = await connectInMemory(gateway, { principal: { id: 'test' } });
    cleanups.push(() => client.close());
    await searchNames(client, 'charges a card payment rail');
    const result = await callTool(client, 'rail__charge', {});
    expect(seen).toEqual([{ status: 'unknown', reason: 'The payment rail did not answer in time.' }]);
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/outcome is unknown: the call may have run, and it was not retried/);
    expect(charges).toBe(1);
  });
});
