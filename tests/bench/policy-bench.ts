/**
 * Policy evaluation latency, WASM and CEL, with and without the crypto builtins (SPEC §13).
 * Called by the lead's `npm run bench`; tests never assert on these numbers. Measures
 * `engine.evaluate(input)` alone on an already assembled input (for WASM that includes writing the
 * input into the module's memory, which every real call pays); fetch-plan assembly is not included.
 */
import { readFileSync } from 'node:fs';
import { spendLimitCases } from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import { createHostBuiltins, loadCelEngine, loadRegoEngine, type PolicyEngine } from '../../proxy/policy/index';

/** Warm-up evaluations per case, so the figures are not JIT compilation. */
const WARMUP = 3_000;
/** Cases are measured in alternating rounds, so load from other work on the machine hits all of them alike. */
const ROUNDS = 10;

interface BenchCase {
  readonly engine: PolicyEngine;
  readonly input: unknown;
  /** The outcome the case must produce: a bench that times an error path measures nothing useful. */
  readonly expect: 'allow' | 'deny';
  /** Measured evaluations, split evenly over the rounds. */
  readonly iterations: number;
}

/** p50/p99 in microseconds of `engine.evaluate(input)` per case, measured with `process.hrtime.bigint()`. */
async function measureAll<Name extends string>(
  cases: Readonly<Record<Name, BenchCase>>,
): Promise<Record<Name, { p50Us: number; p99Us: number; iterations: number }>> {
  const runs = (Object.entries(cases) as [Name, BenchCase][]).map(([name, benchCase]) => ({
    name,
    ...benchCase,
    samples: new Float64Array(benchCase.iterations),
  }));
  for (const { name, engine, input, expect } of runs) {
    const outcome = await engine.evaluate(input);
    if (outcome.decision !== expect) throw new Error(`bench case ${name}: ${JSON.stringify(outcome)}, not ${expect}`);
    for (let index = 0; index < WARMUP; index++) await engine.evaluate(input);
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const { engine, input, iterations, samples } of runs) {
      const perRound = iterations / ROUNDS;
      for (let index = round * perRound; index < (round + 1) * perRound; index++) {
        const start = process.hrtime.bigint();
        await engine.evaluate(input);
        samples[index] = Number(process.hrtime.bigint() - start) / 1_000;
      }
    }
  }
  const results = {} as Record<Name, { p50Us: number; p99Us: number; iterations: number }>;
  for (const { name, iterations, samples } of runs) {
    samples.sort();
    const at = (quantile: number) =>
      Math.round((samples[Math.min(samples.length - 1, Math.floor(quantile * samples.length))] ?? 0) * 10) / 10;
    results[name] = { p50Us: at(0.5), p99Us: at(0.99), iterations };
  }
  return results;
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
  // deny_dangerous in CEL, as close as CEL gets: cel-js `matches` is a JavaScript RegExp, which has
  // no RE2 `(?i)` flag (it would throw on every call), hence lowerAscii(); and CEL cannot walk
  // arbitrary depth, so only top-level string arguments are checked.
  const plainCel = loadCelEngine({
    builtins,
    checks: {
      engine: 'cel-v1',
      package: 'deny_dangerous',
      tiers: [{ tier: 'safe', checks: ['tool_name_safe', 'arguments_safe'] }],
      checks: {
        tool_name_safe:
          "type(input.tool_name) == string && !input.tool_name.lowerAscii().matches(r'(^|[_.\\-]|__)(delete|drop|destroy|truncate|wipe|purge|erase|rm|rmdir|format|shutdown|kill)([_.\\-]|$)')",
        arguments_safe:
          "input.arguments.all(name, type(input.arguments[name]) != string || !input.arguments[name].lowerAscii().matches(r'(\\brm\\s+-[a-z]*(rf|fr)|\\bdrop\\s+(table|database|schema)\\b|\\btruncate\\s+table\\b|\\bmkfs\\b|\\bdd\\s+if=|:\\(\\)\\s*\\{)'))",
      },
    },
  });
  const plainInput = { tool_name: 'files__read_file', arguments: { path: 'notes.txt' }, server_name: 'files' };
  const approved = spendLimitCases().find((entry) => entry.name === 'over limit with approver')?.input;
  // Same spend-limit policy, but the token is not a JWS, so no signature is ever verified.
  const noSignature = spendLimitCases().find((entry) => entry.name === 'garbage token')?.input;
  const results = await measureAll({
    wasmWithoutCrypto: { engine: spendRego, input: noSignature, expect: 'deny', iterations: 20_000 },
    celWithoutCrypto: { engine: spendCel, input: noSignature, expect: 'deny', iterations: 20_000 },
    wasmRegexExample: { engine: plainRego, input: plainInput, expect: 'allow', iterations: 20_000 },
    celRegexExample: { engine: plainCel, input: plainInput, expect: 'allow', iterations: 20_000 },
    wasmWithCrypto: { engine: spendRego, input: approved, expect: 'allow', iterations: 5_000 },
    celWithCrypto: { engine: spendCel, input: approved, expect: 'allow', iterations: 5_000 },
  });
  return {
    policyEvaluation: results,
    targets: { wasmWithoutCryptoP99Us: 200, celWithoutCryptoP99Us: 50 },
    notes:
      'engine.evaluate(input) on a prebuilt input, warmed up, cases interleaved over 10 rounds. withCrypto = spend-limit "over limit with approver" (an allow: two Ed25519 JWS verifications); withoutCrypto = spend-limit with a non-JWS token (a deny with every failed check named; the signature builtin rejects the token before any crypto, and claim checks are skipped as unverified); regexExample = deny_dangerous on an allowed call (CEL: tool name and top-level arguments, lowerAscii instead of (?i); WASM: OPA recompiles both regexes on every evaluation, its regex cache lives on the heap that is reset per evaluation)',
  };
}
