import { describe, expect, it } from 'vitest';
import type { RelayRequest } from '../gateway/types';
import { createHeldCalls, type HeldStep } from './held-calls';

const form = {
  method: 'elicitation/create',
  params: { mode: 'form', message: 'Where to?', requestedSchema: { type: 'object', properties: {} } },
};

/** A call that asks one question through `relay` and reports the answer, or how it ended. */
function asking(ended: string[]) {
  return async (relay: RelayRequest, signal: AbortSignal) => {
    signal.addEventListener('abort', () => ended.push('aborted'));
    try {
      const answer = await relay(form, {});
      return { content: [{ type: 'text' as const, text: JSON.stringify(answer) }] };
    } catch (error) {
      ended.push(`rejected: ${(error as Error).message}`);
      throw error;
    }
  };
}

const asked = (step: HeldStep) => {
  if (step.kind !== 'asking') throw new Error(`expected a question, got ${step.kind}`);
  return step;
};

describe('held calls', () => {
  it('hands the answer to the waiting request and returns the result', async () => {
    const held = createHeldCalls({ timeoutMs: 60_000 });
    const step = asked(await held.start(asking([]), new AbortController().signal));
    expect(Object.keys(step.inputRequests)).toEqual(['relay-1']);
    expect(held.get(step.call.id)).toBe(step.call);
    const done = await step.call.resume(
      { 'relay-1': { action: 'accept', content: { where: 'home' } } },
      new AbortController().signal,
    );
    expect(done).toEqual({
      kind: 'done',
      result: { content: [{ type: 'text', text: '{"action":"accept","content":{"where":"home"}}' }] },
    });
    expect(held.get(step.call.id)).toBeUndefined();
  });

  it('asks again when the retry carries no answer of the right kind', async () => {
    const held = createHeldCalls({ timeoutMs: 60_000 });
    const step = asked(await held.start(asking([]), new AbortController().signal));
    const again = asked(await step.call.resume({ 'relay-1': { roots: [] } }, new AbortController().signal));
    expect(Object.keys(again.inputRequests)).toEqual(['relay-1']);
    expect(again.call.round).toBe(2);
  });

  it('cancels and forgets a call nobody answers in time', async () => {
    const ended: string[] = [];
    const held = createHeldCalls({ timeoutMs: 20 });
    const step = asked(await held.start(asking(ended), new AbortController().signal));
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(held.get(step.call.id)).toBeUndefined();
    expect(ended).toEqual(['aborted', 'rejected: The client did not answer in time.']);
  });

  it('cancels the call when the client gives up on the request that waits for it', async () => {
    const ended: string[] = [];
    const held = createHeldCalls({ timeoutMs: 60_000 });
    // Asks once, then works until cancelled.
    const call = async (relay: RelayRequest, signal: AbortSignal) => {
      await relay(form, {});
      return new Promise<never>((_, reject) => {
        const stop = () => {
          ended.push('aborted');
          reject(new Error('cancelled'));
        };
        if (signal.aborted) stop();
        else signal.addEventListener('abort', stop);
      });
    };
    const step = asked(await held.start(call, new AbortController().signal));
    const giveUp = new AbortController();
    const waiting = step.call.resume({ 'relay-1': { action: 'accept', content: {} } }, giveUp.signal);
    giveUp.abort();
    await expect(waiting).rejects.toThrow('cancelled');
    expect(ended).toEqual(['aborted']);
    expect(held.get(step.call.id)).toBeUndefined();
  });

  it('a cancelled call that goes on regardless is never held or asked again', async () => {
    const held = createHeldCalls({ timeoutMs: 60_000 });
    // Ignores its signal: after the first answer it works a moment, then asks again.
    const call = async (relay: RelayRequest) => {
      await relay(form, {});
      await new Promise((resolve) => setTimeout(resolve, 10));
      await relay(form, {});
      return { content: [] };
    };
    const step = asked(await held.start(call, new AbortController().signal));
    const giveUp = new AbortController();
    const waiting = step.call.resume({ 'relay-1': { action: 'accept', content: {} } }, giveUp.signal);
    giveUp.abort();
    await expect(waiting).rejects.toThrow(/cannot ask the client/);
    expect(held.get(step.call.id)).toBeUndefined();
  });

  it('refuses a question beyond the limit of calls held at once', async () => {
    const held = createHeldCalls({ timeoutMs: 60_000, limit: 1 });
    asked(await held.start(asking([]), new AbortController().signal));
    const ended: string[] = [];
    await expect(held.start(asking(ended), new AbortController().signal)).rejects.toThrow(/cannot ask the client/);
    expect(ended).toEqual(['rejected: Refused by the proxy: cannot ask the client elicitation/create']);
  });
});
