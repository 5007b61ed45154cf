import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CompactSign } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type FamilySpendCase,
  type FamilySpendInput,
  familySpendCheckIds,
  flipCharacter,
} from '../../policies/family-spend/fixtures/family-spend-fixtures';
import { syntheticParty } from '../../policies/family-spend/fixtures/synthetic-household';
import {
  createHostBuiltins,
  didKeyFromEd25519,
  loadCelEngine,
  loadRegoEngine,
  type PolicyEngine,
} from '../../proxy/policy/index';

const run = promisify(execFile);
const bundleFile = (name: string) => new URL(`../../policies/family-spend/${name}`, import.meta.url);
const opa = new URL('../../.tools/bin/opa', import.meta.url).pathname;
const cases = (JSON.parse(readFileSync(bundleFile('cases.json'), 'utf8')) as { family_spend_cases: FamilySpendCase[] })
  .family_spend_cases;
const celDocument = JSON.parse(readFileSync(bundleFile('checks.cel.json'), 'utf8')) as {
  bindings: { name: string; expr: string }[];
  tiers: { tier: string; checks: string[] }[];
  checks: Record<string, string>;
};
const regoSource = readFileSync(bundleFile('policy.rego'), 'utf8');
const builtins = createHostBuiltins({ webauthn: { rpId: 'localhost' } });

/** The decisions of an engine over the whole table, by case name. */
async function decide(engine: PolicyEngine, inputs: readonly FamilySpendCase[]): Promise<Record<string, string>> {
  const decisions: Record<string, string> = {};
  for (const entry of inputs) decisions[entry.name] = (await engine.evaluate(entry.input)).decision;
  return decisions;
}

/** Cases a scratch copy decides differently from what the table expects. */
function changed(decisions: Record<string, string>): string[] {
  return cases.filter((entry) => decisions[entry.name] !== entry.expect.decision).map((entry) => entry.name);
}

/**
 * The CEL twin with one check deleted: dropped from every tier, and the binding of the same name
 * (a signature flag other checks read claims through) forced true, as deleting the verification
 * from the source would.
 */
function celWithout(id: string): unknown {
  return {
    ...celDocument,
    bindings: celDocument.bindings.map((binding) => (binding.name === id ? { ...binding, expr: 'true' } : binding)),
    tiers: celDocument.tiers.map((tier) => ({ ...tier, checks: tier.checks.filter((check) => check !== id) })),
  };
}

describe('every family-spend check is load-bearing', () => {
  const work = mkdtempSync(join(tmpdir(), 'family-spend-mutations-'));
  const capabilities = join(work, 'capabilities.json');
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  beforeAll(async () => {
    if (!existsSync(opa)) throw new Error('the pinned opa is missing: run bash scripts/policies-build.sh first');
    // OPA's own capabilities plus the host builtins, as scripts/policies-build.sh writes them.
    const base = JSON.parse((await run(opa, ['capabilities', '--current'], { maxBuffer: 1 << 24 })).stdout) as {
      builtins: { name: string }[];
    };
    const extra = JSON.parse(
      readFileSync(new URL('../../policies/capabilities.extra.json', import.meta.url), 'utf8'),
    ) as { builtins: { name: string }[] };
    const names = new Set(base.builtins.map((builtin) => builtin.name));
    base.builtins.push(...extra.builtins.filter((builtin) => !names.has(builtin.name)));
    writeFileSync(capabilities, JSON.stringify(base));
  });

  /** The Rego with one check deleted: the check's rule forced true (`<id> := true`), compiled by the pinned opa. */
  async function regoWithout(id: string): Promise<PolicyEngine> {
    const folder = mkdtempSync(join(work, `${id}-`));
    writeFileSync(join(folder, 'policy.rego'), `${regoSource}\n# mutation: the check deleted\n${id} := true\n`);
    const entrypoints = ['allow', 'failed_checks', 'deny_reason', 'decision'].flatMap((name) => [
      '-e',
      `family_spend/${name}`,
    ]);
    await run(
      opa,
      ['build', '-t', 'wasm', '--capabilities', capabilities, ...entrypoints, '-o', 'bundle.tar.gz', 'policy.rego'],
      { cwd: folder },
    );
    await run('tar', ['-xzf', 'bundle.tar.gz', '/policy.wasm'], { cwd: folder });
    return loadRegoEngine({ wasm: readFileSync(join(folder, 'policy.wasm')), builtins });
  }

  it('the unmutated engines decide the table as expected (the baseline the mutants are compared with)', async () => {
    const rego = await loadRegoEngine({ wasm: readFileSync(bundleFile('policy.wasm')), builtins });
    const cel = loadCelEngine({ checks: celDocument, builtins });
    expect(changed(await decide(rego, cases))).toEqual([]);
    expect(changed(await decide(cel, cases))).toEqual([]);
  });

  it.each(familySpendCheckIds.map((id) => [id]))(
    'deleting %s from the CEL twin wrongly allows a case of the table',
    async (id) => {
      const engine = loadCelEngine({ checks: celWithout(id), builtins });
      const decisions = await decide(engine, cases);
      const wronglyAllowed = cases.filter(
        (entry) => entry.expect.decision === 'deny' && decisions[entry.name] === 'allow',
      );
      expect(wronglyAllowed.map((entry) => entry.name)).not.toEqual([]);
    },
  );

  it.each(familySpendCheckIds.map((id) => [id]))(
    'deleting %s from the Rego wrongly allows a case of the table',
    async (id) => {
      const engine = await regoWithout(id);
      const decisions = await decide(engine, cases);
      const wronglyAllowed = cases.filter(
        (entry) => entry.expect.decision === 'deny' && decisions[entry.name] === 'allow',
      );
      expect(wronglyAllowed.map((entry) => entry.name)).not.toEqual([]);
    },
    30_000,
  );
});

/** mulberry32: a small seeded PRNG, so the mutations are the same on every run. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type JwsPath =
  | 'invoice'
  | 'childApproval'
  | 'parentApproval'
  | `${'child' | 'parent'}Evidence.${'membership' | 'enrollment'}`;

function readJws(input: FamilySpendInput, path: JwsPath): string | undefined {
  const [head, tail] = path.split('.') as [string, 'membership' | 'enrollment' | undefined];
  const value = (input as unknown as Record<string, unknown>)[head];
  if (tail === undefined) return typeof value === 'string' ? value : undefined;
  return (value as Record<string, string> | undefined)?.[tail];
}

function writeJws(input: FamilySpendInput, path: JwsPath, jws: string): FamilySpendInput {
  const [head, tail] = path.split('.') as [keyof FamilySpendInput, 'membership' | 'enrollment' | undefined];
  if (tail === undefined) return { ...input, [head]: jws };
  return { ...input, [head]: { ...(input[head] as object), [tail]: jws } };
}

describe('property: mutated valid evidence never pays', () => {
  const valid = cases.filter((entry) => entry.expect.decision === 'allow' && entry.name.includes('the child'));
  const count = 300;

  it(`${count} seeded mutations of the valid orders: zero allows, and both engines agree`, async () => {
    const random = seeded(13);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
    const rego = await loadRegoEngine({ wasm: readFileSync(bundleFile('policy.wasm')), builtins });
    const cel = loadCelEngine({ checks: celDocument, builtins });
    const stranger = syntheticParty('mutation stranger');
    const strangerDid = didKeyFromEd25519(Buffer.from(stranger.jwk.x, 'base64url'));
    const kinds: Record<string, number> = {};
    const allowed: string[] = [];

    for (let index = 0; index < count; index++) {
      const base = pick(valid);
      const input = base.input;
      const familyTier = input.arguments.amountCents > 1000;
      // Only the fields this order's allow rests on: the parent's, for the $4 order, are not needed.
      const paths = (
        ['invoice', 'childApproval', 'childEvidence.membership', 'childEvidence.enrollment'] as JwsPath[]
      ).concat(familyTier ? ['parentApproval', 'parentEvidence.membership', 'parentEvidence.enrollment'] : []);
      const others = valid.filter((entry) => entry.name !== base.name);
      const kind = pick(['flip', 'swap', 'drop-field', 'drop-claim-and-resign', 'resign-as-self', 'amount'] as const);
      kinds[kind] = (kinds[kind] ?? 0) + 1;
      let mutated: FamilySpendInput = input;
      const path = pick(paths);
      const jws = readJws(input, path) ?? '';
      switch (kind) {
        case 'flip':
          mutated = writeJws(input, path, flipCharacter(jws, pick([0, 1, 2] as const), 0.1 + random() * 0.8));
          break;
        case 'swap': {
          const other = pick(others).input;
          const choices: FamilySpendInput[] = [
            { ...input, childApproval: other.childApproval },
            ...(familyTier
              ? [
                  { ...input, childApproval: input.parentApproval ?? '', parentApproval: input.childApproval },
                  { ...input, parentApproval: other.parentApproval ?? other.childApproval },
                  { ...input, childEvidence: input.parentEvidence ?? input.childEvidence },
                ]
              : []),
            { ...input, invoice: other.invoice },
          ];
          mutated = pick(choices);
          break;
        }
        case 'drop-field': {
          const field = pick(
            familyTier
              ? ['childApproval', 'parentApproval', 'parentEvidence', 'childEvidence']
              : ['childApproval', 'childEvidence'],
          );
          const { [field as keyof FamilySpendInput]: _dropped, ...rest } = input;
          mutated = rest as FamilySpendInput;
          break;
        }
        case 'drop-claim-and-resign':
        case 'resign-as-self': {
          // Re-sign with another key (jose). `resign-as-self` also names that key as the issuer,
          // so the signature itself verifies and only the chain of trust can refuse it.
          const claims = JSON.parse(Buffer.from(jws.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<
            string,
            unknown
          >;
          if (kind === 'drop-claim-and-resign') delete claims[pick(Object.keys(claims))];
          else claims.iss = strangerDid;
          const signed = await new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
            .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT' })
            .sign(stranger.privateKey);
          mutated = writeJws(input, path, signed);
          break;
        }
        case 'amount': {
          const amounts = [1, 399, 401, 999, 1000, 1001, 1499, 1501, 20000, 30000].filter(
            (amount) => amount !== input.arguments.amountCents,
          );
          mutated = { ...input, arguments: { ...input.arguments, amountCents: pick(amounts) } };
          break;
        }
      }
      const [a, b] = [await rego.evaluate(mutated), await cel.evaluate(mutated)];
      if (a.decision === 'allow' || b.decision === 'allow') allowed.push(`${index} ${kind} ${path} of ${base.name}`);
      expect({ index, kind, decision: a.decision }).toEqual({ index, kind, decision: b.decision });
    }
    expect(allowed).toEqual([]);
    // Every kind of mutation actually ran.
    expect(Object.keys(kinds).sort()).toEqual([
      'amount',
      'drop-claim-and-resign',
      'drop-field',
      'flip',
      'resign-as-self',
      'swap',
    ]);
  }, 120_000);
});
