import { describe, expect, it } from 'vitest';
import { ProxyError } from '../errors';
import type { Gateway } from '../gateway/types';
import { answerMetaTool } from './search-mode-server';

/** A gateway whose every operation fails with `error`: the face's translator is all that is under test. */
function failingGateway(error: unknown): Gateway {
  const fail = async () => {
    throw error;
  };
  return { search: fail, call: fail, load: fail } as unknown as Gateway;
}

const context = { principal: { id: 'test' }, scope: { kind: 'session', id: 's' } } as const;

describe('the search-mode face translates faults once, and logs their cause', () => {
  it('an unexpected fault: a clear message for the caller, the cause (and nothing of it shown) in the log', async () => {
    const logged: [string, unknown][] = [];
    const result = await answerMetaTool(
      failingGateway(new Error('boom in /srv/secret/file')),
      { name: 'call_tool', arguments: { tool_name: 'x__y' } },
      context,
      (what, error) => logged.push([what, error]),
    );
    expect(result).toEqual({
      content: [{ type: 'text', text: 'The request failed unexpectedly; nothing was changed.' }],
      isError: true,
    });
    expect(logged).toHaveLength(1);
    expect(logged[0]?.[0]).toBe('call_tool failed');
    expect(String(logged[0]?.[1])).toContain('boom in /srv/secret/file');
  });

  it("a ProxyError's message is written for the model: shown as is, nothing logged", async () => {
    const logged: unknown[] = [];
    const result = await answerMetaTool(
      failingGateway(new ProxyError('downstream-unavailable', 'Server "x" is not connected.')),
      { name: 'search_tools', arguments: { query: 'anything' } },
      context,
      (_what, error) => logged.push(error),
    );
    expect(result).toMatchObject({ content: [{ type: 'text', text: 'Server "x" is not connected.' }], isError: true });
    expect(logged).toEqual([]);
  });
});
