/**
 * Policy evaluation latency, WASM and CEL, with and without the crypto builtins (SPEC §13).
 * Called by the lead's `npm run bench`; tests never assert on these numbers.
 */
import { readFileSync } from 'node:fs';
import { spendLimitCases } from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import { createHostBuiltins, loadCelEngine, loadRegoEngine, type PolicyEngine } from '../../proxy/policy/index';

const WARMUP = 500;
const ITERATIONS = 5_000;

/** p50/p99 in microseconds of `engine.evaluate(input)`, measured with `process.hrtime.bigint()`. */
async function measure(
  engine: PolicyEngine,
  input: unknown,
  iterations = ITERATIONS,
): Promise<{ p50Us: number; p99Us: number; iterations: number }> {
  for (let index = 0; index < WARMUP; index++) await engine.evaluate(input);
  const samples = new Float64Array(iterations);
  for (let index = 0; index < iterations; index++) {
    const start = process.hrtime.bigint();
    await engine.evaluate(input);
    samples[index] = Number(process.hrtime.bigint() - start) / 1_000;
  }
  samples.sort();
  const at = (quantile: number) =>
    Math.round((samples[Math.min(samples.length - 1, Math.floor(quantile * samples.length))] ?? 0) * 10) / 10;
  return { p50Us: at(0.5), p99Us: at(0.99), iterations };
}

/** Runs the policy benchmarks and returns JSON-ready figures. */
export async function policyBench(): Promise<Record<string, unknown>> {
  const builtins = createHostBuiltins();
  const file = (path: string) => new URL(`../../${path}`, import.meta.url);
  const spendRego = await loadRegoEngine({ wasm: readFileSync(file('policies/spend-limit/policy.wasm')), builtins });
  const spendCel = loadCelEngine({
    checks: JSON.parse(readFileSync(file('policies/spend-limit/checks.cel.json'), 'utf8')),
    builtins,
  });
  const plainRego = await loadRegoEngine({
    wasm: readFileSync(file('examples/deny_dangerous.wasm')),
    builtins,
    requireExplanations: false,
  });
  const plainCel = loadCelEngine({
    builtins,
    checks: {
      engine: 'cel-v1',
      package: 'deny_dangerous',
      tiers: [{ tier: 'safe', checks: ['tool_name_safe'] }],
      checks: {
        tool_name_safe:
          "type(input.tool_name) == string && !input.tool_name.matches('(?i)(^|[_.\\\\-]|__)(delete|drop|destroy|truncate|wipe|purge|erase|rm|rmdir|format|shutdown|kill)([_.\\\\-]|$)')",
      },
    },
  });
  const plainInput = { tool_name: 'files__read_file', arguments: { path: 'notes.txt' }, server_name: 'files' };
  const approved = spendLimitCases().find((entry) => entry.name === 'over limit with approver')?.input;
  // Same spend-limit policy, but the token is not a JWS, so no signature is ever verified.
  const noSignature = spendLimitCases().find((entry) => entry.name === 'garbage token')?.input;
  const results = {
    wasmWithoutCrypto: await measure(spendRego, noSignature),
    celWithoutCrypto: await measure(spendCel, noSignature),
    wasmRegexExample: await measure(plainRego, plainInput),
    celRegexExample: await measure(plainCel, plainInput),
    wasmWithCrypto: await measure(spendRego, approved, 2_000),
    celWithCrypto: await measure(spendCel, approved, 2_000),
  };
  return {
    policyEvaluation: results,
    targets: { wasmWithoutCryptoP99Us: 200, celWithoutCryptoP99Us: 50 },
    notes:
      'withCrypto = spend-limit "over limit with approver" (two Ed25519 JWS verifications); withoutCrypto = spend-limit with a non-JWS token (all checks run, no signature verified); regexExample = deny_dangerous tool-name regex',
  };
}
