import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type SpendLimitCase, spendLimitCases } from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import { ProxyError } from '../../proxy/index';
import { createHostBuiltins, loadCelEngine, loadRegoEngine, type PolicyEngine } from '../../proxy/policy/index';

const bundleFile = (name: string) => new URL(`../../policies/spend-limit/${name}`, import.meta.url);
const builtins = createHostBuiltins();
const cases = spendLimitCases();
const byName = (name: string): SpendLimitCase => {
  const found = cases.find((entry) => entry.name === name);
  if (!found) throw new Error(`no case ${name}`);
  return found;
};

const engines: Record<string, () => Promise<PolicyEngine>> = {
  rego: () => loadRegoEngine({ wasm: readFileSync(bundleFile('policy.wasm')), builtins }),
  cel: async () => loadCelEngine({ checks: JSON.parse(readFileSync(bundleFile('checks.cel.json'), 'utf8')), builtins }),
};

describe.each(Object.entries(engines))('policy engine contract: %s', (_kind, load) => {
  it('allows a requester credential bound to the call within the limit', async () => {
    const engine = await load();
    expect(await engine.evaluate(byName('solo within limit').input)).toEqual({ decision: 'allow' });
  });

  it.each(cases.map((entry) => [entry.name, entry] as const))(
    'decides the shared case "%s" as expected',
    async (_name, entry) => {
      const outcome = await (await load()).evaluate(entry.input);
      expect(outcome.decision).toBe(entry.expect.decision);
      if (outcome.decision === 'deny')
        expect(outcome.failedChecks).toEqual(expect.arrayContaining([...(entry.expect.mustFail ?? [])]));
    },
  );

  it('denies a tampered signature with the failing check named', async () => {
    const outcome = await (await load()).evaluate(byName('tampered signature').input);
    expect(outcome).toMatchObject({ decision: 'deny', failedChecks: expect.arrayContaining(['requester_signature']) });
  });

  it('refuses a valid signature paired with different claims (claims only from verified bytes)', async () => {
    const outcome = await (await load()).evaluate(byName('valid signature with different claims').input);
    expect(outcome.decision).toBe('deny');
  });

  it.each([
    ['null input', null],
    ['string input', 'garbage'],
    ['number input', 42],
    ['array input', [1, 2]],
    ['empty object', {}],
  ])('never allows or throws on %s', async (_label, input) => {
    const outcome = await (await load()).evaluate(input);
    expect(outcome.decision).not.toBe('allow');
  });

  it('reports a malformed configured key as an error, not a denial', async () => {
    const outcome = await (await load()).evaluate(byName('malformed configured key').input);
    expect(outcome).toMatchObject({ decision: 'error', code: 'builtin-failed' });
  });
});

describe('engines decide the shared table identically', () => {
  it('produces the same outcome and failed checks on every case', async () => {
    const rego = await engines.rego?.();
    const cel = await engines.cel?.();
    for (const entry of cases) {
      const [a, b] = [await rego?.evaluate(entry.input), await cel?.evaluate(entry.input)];
      expect({ name: entry.name, decision: a?.decision, failed: a?.decision === 'deny' ? a.failedChecks : [] }).toEqual(
        {
          name: entry.name,
          decision: b?.decision,
          failed: b?.decision === 'deny' ? b.failedChecks : [],
        },
      );
    }
  });

  it('the committed cases.json is what the fixture script generates', () => {
    const committed = JSON.parse(readFileSync(bundleFile('cases.json'), 'utf8'));
    expect(committed).toEqual(JSON.parse(JSON.stringify({ spend_limit_cases: cases })));
  });
});

describe('rego decision document', () => {
  it('explains a denial from the one `decision` evaluation: every failed check and the deny_reason', async () => {
    const engine = await loadRegoEngine({ wasm: readFileSync(bundleFile('policy.wasm')), builtins });
    const failedChecks = [
      'approver_bound',
      'approver_issuer',
      'approver_present',
      'approver_signature',
      'approver_window',
      'requester_bound',
      'requester_issuer',
      'requester_signature',
      'requester_window',
    ];
    expect(await engine.evaluate(byName('garbage token').input)).toEqual({
      decision: 'deny',
      failedChecks,
      reasons: [`spend_limit denied: ${failedChecks.join(', ')}`],
    });
  });
});

describe('engine faults', () => {
  it('refuses at load a WASM module importing a builtin the host does not register', async () => {
    const wasm = readFileSync(new URL('./fixtures/unknown-builtin.wasm', import.meta.url));
    await expect(loadRegoEngine({ wasm, builtins })).rejects.toMatchObject({ code: 'missing-builtin' });
  });

  it('reports a non-boolean CEL check as an error', async () => {
    const engine = loadCelEngine({
      checks: {
        engine: 'cel-v1',
        package: 't',
        tiers: [{ tier: 'only', checks: ['amount'] }],
        checks: { amount: 'input.amount' },
      },
      builtins,
    });
    expect(await engine.evaluate({ amount: 5 })).toMatchObject({ decision: 'error', code: 'non-boolean-result' });
  });

  it('reports a CEL check reading a missing field as an error', async () => {
    const engine = loadCelEngine({
      checks: {
        engine: 'cel-v1',
        package: 't',
        tiers: [{ tier: 'only', checks: ['a'] }],
        checks: { a: 'input.amount > 1' },
      },
      builtins,
    });
    expect((await engine.evaluate({})).decision).toBe('error');
  });

  it('refuses at load a CEL file whose tier names an unknown check or whose expression does not parse', () => {
    expect(() =>
      loadCelEngine({
        checks: { engine: 'cel-v1', package: 't', tiers: [{ tier: 'x', checks: ['nope'] }], checks: { a: 'true' } },
        builtins,
      }),
    ).toThrow(ProxyError);
    expect(() =>
      loadCelEngine({
        checks: { engine: 'cel-v1', package: 't', tiers: [{ tier: 'x', checks: ['a'] }], checks: { a: 'true &&' } },
        builtins,
      }),
    ).toThrow(ProxyError);
  });

  it('keeps WASM memory flat across 10 000 evaluations', async () => {
    const engine = await loadRegoEngine({ wasm: readFileSync(bundleFile('policy.wasm')), builtins });
    const allowInput = byName('over limit with approver').input;
    const denyInput = byName('tampered signature').input;
    await engine.evaluate(allowInput);
    await engine.evaluate(denyInput);
    const before = engine.memoryBytes();
    for (let index = 0; index < 10_000; index++) await engine.evaluate(index % 2 === 0 ? allowInput : denyInput);
    expect(engine.memoryBytes()).toBe(before);
  });
});
