import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type CallRequest, ProxyError, regoPolicyFilter } from '../../proxy/index';

/**
 * A `.rego` path with no opa to compile it (SPEC §3.7): the filter uses the sibling precompiled
 * `.wasm`, and without one refuses to start, naming both. The policy is copied into a fresh folder so
 * the presence of the sibling is the only difference between the two cases.
 */

/** An executable name that exists on no PATH, so spawning it fails with ENOENT like a missing opa. */
const MISSING_OPA = 'opa-not-installed-anywhere';
const example = (extension: string) => new URL(`../../examples/deny_dangerous.${extension}`, import.meta.url);
const context = { principal: { id: 'test' }, scope: { kind: 'session' as const, id: 'rego-without-opa' } };

/** A call as the gateway stamps it; deny_dangerous reads only the tool name and the arguments. */
function call(tool: string, args: Record<string, unknown>): CallRequest {
  return { tool, toolName: tool, server: undefined, arguments: args, hasOutputSchema: false, credentialFields: [] };
}

describe('rego_policy from a .rego without opa', () => {
  let folder: string;
  let regoPath: string;

  beforeEach(async () => {
    folder = await mkdtemp(join(tmpdir(), 'rego-without-opa-'));
    regoPath = join(folder, 'deny_dangerous.rego');
    await copyFile(example('rego'), regoPath);
  });

  afterEach(async () => {
    await rm(folder, { recursive: true, force: true });
  });

  it('refuses to start, naming the missing opa and the missing precompiled .wasm', async () => {
    const failure = await regoPolicyFilter({ regoPath, opaCommand: MISSING_OPA }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(ProxyError);
    expect(failure).toMatchObject({ code: 'compile-failed' });
    const message = (failure as ProxyError).message;
    // The readable source was found: this is the "no compiler, no artifact" refusal, not a read failure.
    expect(message).not.toMatch(/cannot read/);
    expect(message).toContain('needs the opa binary to compile (not found on PATH)');
    expect(message).toContain(`a precompiled ${join(folder, 'deny_dangerous.wasm')}`);
  });

  it('loads the sibling .wasm once it is there, says so, and decides with it', async () => {
    await copyFile(example('wasm'), join(folder, 'deny_dangerous.wasm'));
    const reported: unknown[] = [];
    const filter = await regoPolicyFilter({
      regoPath,
      opaCommand: MISSING_OPA,
      onError: (error) => reported.push(error),
    });
    expect(reported).toHaveLength(1);
    expect(reported[0]).toMatchObject({ code: 'compile-failed', message: expect.stringMatching(/opa not found/) });

    expect(await filter(call('files__read_file', { path: 'a.txt' }), context)).toEqual({ decision: 'allow' });
    expect(await filter(call('db__drop_table', {}), context)).toEqual({
      decision: 'deny',
      reason: 'tool db__drop_table looks destructive; this proxy refuses it',
    });
    expect(await filter(call('shell__run', { command: 'rm -rf /' }), context)).toEqual({
      decision: 'deny',
      reason: 'an argument looks like a destructive shell or SQL command; this proxy refuses it',
    });
  });
});
