import { describe, expect, it } from 'vitest';
import type { CallRequest } from '../gateway/types';
import { regoPolicyFilter } from './rego-policy-filter';

const example = (extension: string) => new URL(`../../examples/deny_dangerous.${extension}`, import.meta.url).pathname;
const context = { principal: { id: 'test' }, scope: { kind: 'session' as const, id: 's' } };

/** A call as the gateway stamps it. */
function call(tool: string, server: string, args: Record<string, unknown>): CallRequest {
  const toolName = tool.slice(server.length + 2);
  return {
    tool,
    toolName,
    server: { name: server, admission: 'config' },
    arguments: args,
    hasOutputSchema: false,
    credentialFields: [],
  };
}

describe('rego_policy filter with examples/deny_dangerous', () => {
  it.each([
    ['precompiled wasm', { wasmPath: example('wasm') }],
    [
      'rego with opa missing (falls back to the sibling wasm)',
      { regoPath: example('rego'), opaCommand: 'opa-not-installed-anywhere' },
    ],
  ])('%s: allows ordinary calls and denies destructive ones with deny_reason', async (_label, options) => {
    const filter = await regoPolicyFilter(options);
    expect(filter.name).toBe('regoPolicy');
    expect(await filter(call('files__read_file', 'files', { path: 'a.txt' }), context)).toEqual({
      decision: 'allow',
    });
    expect(await filter(call('db__drop_table', 'db', {}), context)).toEqual({
      decision: 'deny',
      reason: 'tool db__drop_table looks destructive; this proxy refuses it',
    });
    expect(await filter(call('shell__run', 'shell', { command: 'rm -rf /' }), context)).toMatchObject({
      decision: 'deny',
    });
  });

  it('fails at startup with a clear error when neither opa nor a precompiled wasm exists', async () => {
    await expect(
      regoPolicyFilter({ regoPath: '/nonexistent/policy.rego', opaCommand: 'opa-not-installed-anywhere' }),
    ).rejects.toMatchObject({
      code: 'compile-failed',
    });
  });
});
