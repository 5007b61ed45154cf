import type { Result } from '@modelcontextprotocol/client';
import { inputRequired } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { fulfilInputRounds, MAX_INPUT_ROUNDS } from './relay-server-requests';

const done = { content: [{ type: 'text', text: 'done' }] };
const tooMany = (rounds: number) => new Error(`more than ${rounds} rounds`);

/** A callback that records what it is given and answers `answer` (or what `answer` makes of it). */
function recorder<Given>(answer: Result | ((given: Given) => Result)) {
  const seen: Given[] = [];
  const call = async (given: Given) => {
    seen.push(given);
    return typeof answer === 'function' ? answer(given) : answer;
  };
  return { seen, call };
}

describe('fulfilInputRounds', () => {
  it('returns a first result that asks nothing as it is, asking and retrying nothing', async () => {
    const ask = recorder({});
    const retry = recorder(done);
    expect(await fulfilInputRounds(done, ask.call, retry.call, tooMany)).toBe(done);
    expect([ask.seen, retry.seen]).toEqual([[], []]);
  });

  it("asks each round's questions, then retries with every answer under its key and the server's state", async () => {
    const first = inputRequired({
      inputRequests: {
        name: inputRequired.elicit({
          message: 'Your name?',
          requestedSchema: { type: 'object', properties: { name: { type: 'string' } } },
        }),
      },
      requestState: 'state-1',
    });
    const ask = recorder((request: { method: string }) => ({
      action: 'accept',
      content: { name: `answer to ${request.method}` },
    }));
    const retry = recorder(done);
    expect(await fulfilInputRounds(first, ask.call, retry.call, tooMany)).toBe(done);
    expect(retry.seen).toEqual([
      {
        inputResponses: { name: { action: 'accept', content: { name: 'answer to elicitation/create' } } },
        requestState: 'state-1',
      },
    ]);
  });

  it('retries a round that carries only a request state with that state alone, asking nobody', async () => {
    const ask = recorder({});
    const retry = recorder(done);
    expect(await fulfilInputRounds(inputRequired({ requestState: 'shed-load' }), ask.call, retry.call, tooMany)).toBe(
      done,
    );
    expect(ask.seen).toEqual([]);
    expect(retry.seen).toEqual([{ requestState: 'shed-load' }]);
  });

  it(`gives up with the caller's error after ${MAX_INPUT_ROUNDS} rounds`, async () => {
    const again = inputRequired({ requestState: 'again' });
    const retry = recorder(again);
    await expect(fulfilInputRounds(again, recorder({}).call, retry.call, tooMany)).rejects.toThrow(
      `more than ${MAX_INPUT_ROUNDS} rounds`,
    );
    expect(retry.seen).toHaveLength(MAX_INPUT_ROUNDS);
  });
});
