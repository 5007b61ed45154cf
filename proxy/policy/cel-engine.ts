import { Environment, type ParseResult } from '@marcbachmann/cel-js';
import { z } from 'zod';
import { ProxyError } from '../errors';
import type { HostBuiltins } from './host-builtins';
import { normaliseOutcome, type PolicyEngine, type PolicyOutcome, type RawEngineResult } from './policy-engine';

/** `checks.cel.json` (SPEC §4.3), plus optional ordered `bindings` evaluated before the checks. */
export const celChecksSchema = z
  .object({
    engine: z.literal('cel-v1'),
    package: z.string().min(1),
    /** Named intermediate values (e.g. claims read from a verified JWS), each visible to later ones. */
    bindings: z
      .array(z.object({ name: z.string().regex(/^[a-z_][a-z0-9_]*$/i), expr: z.string().min(1) }).strict())
      .optional(),
    tiers: z.array(z.object({ tier: z.string().min(1), checks: z.array(z.string().min(1)).min(1) }).strict()).min(1),
    checks: z.record(z.string().min(1), z.string().min(1)),
    /** A check whose guard is false counts as failed without being evaluated (so it cannot fault on absent input). */
    guards: z.record(z.string().min(1), z.string().min(1)).optional(),
  })
  .strict();

/** A parsed `checks.cel.json`. */
export type CelChecks = z.infer<typeof celChecksSchema>;

/** Options for {@link loadCelEngine}. */
export interface CelEngineOptions {
  /** The `checks.cel.json` document (validated here). */
  readonly checks: unknown;
  readonly builtins: HostBuiltins;
}

/** CEL names of the host builtins. CEL (and cel-js) has no dotted global functions, so Rego's `crypto.sha256` is `sha256` here. */
export const CEL_BUILTIN_NAMES = [
  'sha256',
  'base64url_encode_no_pad',
  'base64url_decode',
  'parse_json',
  'key_from_did_key',
  'jwt_verify_eddsa',
  'verify_webauthn',
] as const;

/**
 * Converts policy input (JSON-shaped data) into the values cel-js reads as CEL maps and lists.
 * cel-js types an object by its `constructor`, so an argument named `constructor` (an own key a
 * client is free to send) made a plain object "Unsupported type" and faulted the CEL twin while
 * Rego, which sees JSON, decided normally. As `Map`s, objects are maps whatever their keys
 * (`constructor`, `__proto__`, `toString`), so both engines see the same input shape.
 */
function toCelValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toCelValue);
  if (isPlainObject(value)) {
    const map = new Map<string, unknown>();
    for (const key of Object.keys(value)) map.set(key, toCelValue(value[key]));
    return map;
  }
  return value;
}

/**
 * The inverse of {@link toCelValue} at the host-builtin boundary: builtins take the JSON shape
 * Rego hands them. Keys are defined, not assigned, so `__proto__` stays an ordinary own key.
 */
function fromCelValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(fromCelValue);
  if (value instanceof Map) {
    const object: Record<string, unknown> = {};
    for (const [key, entry] of value) {
      Object.defineProperty(object, String(key), {
        value: fromCelValue(entry),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return object;
  }
  return value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** Builds the CEL environment with the host builtins registered; parameters are `dyn` so a wrong type reaches the builtin and is judged there. */
function celEnvironment(builtins: HostBuiltins, variables: readonly string[]): Environment {
  // Every builtin sees JSON-shaped arguments (as under Rego) and returns CEL-shaped values.
  const functions: readonly [signature: string, builtin: (...values: unknown[]) => unknown][] = [
    ['sha256(dyn): string', (value) => builtins.sha256Hex(value)],
    ['base64url_encode_no_pad(dyn): string', (value) => builtins.base64urlEncodeNoPad(value)],
    ['base64url_decode(dyn): string', (value) => builtins.base64urlDecode(value)],
    ['parse_json(dyn): dyn', (value) => builtins.parseJson(value)],
    ['key_from_did_key(dyn): dyn', (did) => builtins.keyFromDidKey(did)],
    ['jwt_verify_eddsa(dyn, dyn): bool', (jws, jwk) => builtins.jwtVerifyEddsa(jws, jwk)],
    ['verify_webauthn(dyn, dyn, dyn, dyn): bool', (a, c, s, k) => builtins.verifyWebauthn(a, c, s, k)],
  ];
  const environment = new Environment({ homogeneousAggregateLiterals: false, enableOptionalTypes: true });
  for (const [signature, builtin] of functions) {
    environment.registerFunction(signature, (...values: unknown[]) => toCelValue(builtin(...values.map(fromCelValue))));
  }
  for (const name of variables) environment.registerVariable(name, 'dyn');
  return environment;
}

interface CompiledCheck {
  readonly id: string;
  readonly expression: ParseResult;
  readonly guard: ParseResult | undefined;
}

/**
 * Loads a CEL policy once: every expression is parsed at load, so a syntax error or an unknown
 * function is a load failure, never a per-call surprise. `allow` = any tier whose checks are all true.
 */
export function loadCelEngine(options: CelEngineOptions): PolicyEngine {
  const parsed = celChecksSchema.safeParse(options.checks);
  if (!parsed.success) throw new ProxyError('bundle-invalid', `checks.cel.json: ${z.prettifyError(parsed.error)}`);
  const spec = parsed.data;
  for (const tier of spec.tiers) {
    for (const id of tier.checks) {
      if (!(id in spec.checks))
        throw new ProxyError('bundle-invalid', `checks.cel.json: tier ${tier.tier} names unknown check ${id}`);
    }
  }
  for (const id of Object.keys(spec.guards ?? {})) {
    if (!(id in spec.checks)) throw new ProxyError('bundle-invalid', `checks.cel.json: guard for unknown check ${id}`);
  }
  const bindingNames = (spec.bindings ?? []).map((binding) => binding.name);
  const environment = celEnvironment(options.builtins, ['input', ...bindingNames]);

  const compile = (where: string, expression: string): ParseResult => {
    try {
      const result = environment.parse(expression);
      const typeCheck = result.check();
      if (!typeCheck.valid) throw typeCheck.error;
      return result;
    } catch (error) {
      throw new ProxyError('bundle-invalid', `checks.cel.json: ${where} does not compile`, { cause: error });
    }
  };
  const bindings = (spec.bindings ?? []).map((binding) => ({
    name: binding.name,
    expression: compile(`binding ${binding.name}`, binding.expr),
  }));
  const checks: CompiledCheck[] = Object.entries(spec.checks).map(([id, expression]) => {
    const guard = spec.guards?.[id];
    return {
      id,
      expression: compile(`check ${id}`, expression),
      guard: guard === undefined ? undefined : compile(`guard ${id}`, guard),
    };
  });
  // Tiers as positions in `checks`, so an evaluation fills one boolean array and looks nothing up by name.
  const tiers = spec.tiers.map((tier) => tier.checks.map((id) => checks.findIndex((check) => check.id === id)));

  /** A check or guard must produce a boolean; anything else is an engine error, not a quiet false. */
  const asBoolean = (value: unknown, where: string): boolean => {
    if (typeof value !== 'boolean')
      throw new ProxyError('non-boolean-result', `${where} returned ${typeof value}, not a boolean`);
    return value;
  };

  return {
    kind: 'cel',
    packageName: spec.package,
    async evaluate(input: unknown): Promise<PolicyOutcome> {
      let raw: RawEngineResult;
      try {
        // CEL reads the same shape Rego does: every object a map, whatever its keys.
        const activation: Record<string, unknown> = { input: toCelValue(input) };
        for (const binding of bindings) activation[binding.name] = binding.expression(activation);
        const passed: boolean[] = [];
        const failedChecks: string[] = [];
        for (const check of checks) {
          const guarded = check.guard === undefined || asBoolean(check.guard(activation), `guard ${check.id}`);
          const result = guarded && asBoolean(check.expression(activation), `check ${check.id}`);
          passed.push(result);
          if (!result) failedChecks.push(check.id);
        }
        const allow = tiers.some((tier) => tier.every((position) => passed[position] === true));
        raw = { kind: 'result', allow, failedChecks, denyReason: undefined };
      } catch (error) {
        raw = { kind: 'fault', error };
      }
      return normaliseOutcome(raw);
    },
  };
}
