import { loadPolicy } from '@open-policy-agent/opa-wasm';
import { ProxyError } from '../errors';
import type { HostBuiltins } from './host-builtins';
import { normaliseOutcome, type PolicyEngine, type PolicyOutcome, type RawEngineResult } from './policy-engine';
import { safeJsonParse } from './safe-json';

/** Options for {@link loadRegoEngine}. */
export interface RegoEngineOptions {
  /** The compiled `policy.wasm` bytes. */
  readonly wasm: Uint8Array;
  /**
   * Rego package (`spend_limit` or `a.b`); entrypoints are `<pkg>/allow`, `<pkg>/failed_checks`,
   * `<pkg>/deny_reason`, and optionally `<pkg>/decision` (all three in one document). When omitted,
   * it is read from the module's single `…/allow` entrypoint.
   */
  readonly packageName?: string;
  readonly builtins: HostBuiltins;
  /**
   * Whether `<pkg>/failed_checks` and `<pkg>/deny_reason` must exist (bundles: yes). When false they
   * are used if the module has them (the simple `rego_policy` filter needs only `allow`).
   */
  readonly requireExplanations?: boolean;
}

/** A Rego/WASM engine; `memoryBytes` lets tests prove the heap does not grow across evaluations. */
export interface RegoEngine extends PolicyEngine {
  readonly kind: 'rego';
  memoryBytes(): number;
}

/** The Rego builtin names the host implements, mapped to the shared implementations. */
export function regoBuiltinTable(builtins: HostBuiltins): Readonly<Record<string, (...args: unknown[]) => unknown>> {
  return {
    'crypto.sha256': (value) => builtins.sha256Hex(value),
    'base64url.encode_no_pad': (value) => builtins.base64urlEncodeNoPad(value),
    base64url_decode: (value) => builtins.base64urlDecode(value),
    parse_json: (value) => builtins.parseJson(value),
    key_from_did_key: (did) => builtins.keyFromDidKey(did),
    'io.jwt.verify_eddsa': (jws, jwk) => builtins.jwtVerifyEddsa(jws, jwk),
    verify_webauthn: (authenticatorData, clientDataJson, signature, jwk) =>
      builtins.verifyWebauthn(authenticatorData, clientDataJson, signature, jwk),
  };
}

/** Builtins that @open-policy-agent/opa-wasm 1.10 implements in JavaScript itself (src/builtins). */
const SDK_BUILTINS = new Set([
  'json.is_valid',
  'sprintf',
  'regex.split',
  'yaml.is_valid',
  'yaml.marshal',
  'yaml.unmarshal',
]);

/** The subset of opa-wasm's LoadedPolicy internals needed to list a module's imported builtins. */
interface PolicyInternals {
  readonly mem: WebAssembly.Memory;
  readonly wasmInstance: WebAssembly.Instance;
  readonly entrypoints: Record<string, number>;
}

/**
 * Loads a compiled Rego policy once. Refuses at load (not at first call) a module that imports a
 * builtin the host does not provide, or lacks an entrypoint. Evaluations reuse one instance; the
 * opa-wasm ABI ≥ 1.2 fast path resets the heap pointer on every `opa_eval`, so memory stays flat.
 */
export async function loadRegoEngine(options: RegoEngineOptions): Promise<RegoEngine> {
  const table = regoBuiltinTable(options.builtins);
  let policy: Awaited<ReturnType<typeof loadPolicy>>;
  try {
    policy = await loadPolicy(options.wasm, undefined, table);
  } catch (error) {
    throw new ProxyError('engine-load-failed', 'cannot load policy WASM', { cause: error });
  }
  const internals = policy as unknown as PolicyInternals;
  const imported = importedBuiltins(internals);
  const missing = imported.filter((name) => !(name in table) && !SDK_BUILTINS.has(name));
  if (missing.length > 0) {
    throw new ProxyError('missing-builtin', `policy needs builtins the host does not provide: ${missing.join(', ')}`);
  }
  const prefix = options.packageName?.replaceAll('.', '/') ?? packageFromEntrypoints(internals.entrypoints);
  const packageName = prefix.replaceAll('/', '.');
  const allowEntrypoint = `${prefix}/allow`;
  const failedChecksName = `${prefix}/failed_checks`;
  const denyReasonName = `${prefix}/deny_reason`;
  const required =
    options.requireExplanations === false ? [allowEntrypoint] : [allowEntrypoint, failedChecksName, denyReasonName];
  for (const entrypoint of required) {
    if (!(entrypoint in internals.entrypoints)) {
      throw new ProxyError('engine-load-failed', `policy WASM has no entrypoint ${entrypoint}`);
    }
  }
  const failedChecksEntrypoint = failedChecksName in internals.entrypoints ? failedChecksName : undefined;
  const denyReasonEntrypoint = denyReasonName in internals.entrypoints ? denyReasonName : undefined;
  const decisionName = `${prefix}/decision`;
  const decisionEntrypoint = decisionName in internals.entrypoints ? decisionName : undefined;

  /**
   * First result of an entrypoint, or undefined when the document is undefined. Each call is one
   * `opa_eval`, which resets the heap pointer first: memory stays flat however many calls run.
   */
  function query(input: unknown, entrypoint: string): unknown {
    const resultSet: unknown = policy.evaluate(input, entrypoint);
    if (!Array.isArray(resultSet) || resultSet.length === 0) return undefined;
    const first: unknown = resultSet[0];
    return typeof first === 'object' && first !== null && 'result' in first ? first.result : undefined;
  }

  /**
   * Without a `decision` entrypoint: `allow` first, since an allow needs nothing more; the other
   * documents are only for explaining a denial (two more evaluations).
   */
  function separateDocuments(input: unknown): RawEngineResult {
    const allow = query(input, allowEntrypoint);
    if (allow === true) return { kind: 'result', allow, failedChecks: [], denyReason: undefined };
    return {
      kind: 'result',
      allow,
      failedChecks: failedChecksEntrypoint ? query(input, failedChecksEntrypoint) : undefined,
      denyReason: denyReasonEntrypoint ? query(input, denyReasonEntrypoint) : undefined,
    };
  }

  return {
    kind: 'rego',
    packageName,
    memoryBytes: () => internals.mem.buffer.byteLength,
    async evaluate(input: unknown): Promise<PolicyOutcome> {
      let raw: RawEngineResult;
      try {
        raw = decisionEntrypoint ? decisionDocument(query(input, decisionEntrypoint)) : separateDocuments(input);
      } catch (error) {
        // Traps, opa_abort strings and builtin exceptions all land here: an error, never a deny.
        raw = { kind: 'fault', error };
      }
      return normaliseOutcome(raw);
    },
  };
}

/**
 * Reads `<pkg>/decision` (`{allow, failed_checks, deny_reason}`): the whole decision from one
 * evaluation instead of three. Anything that is not an object leaves `allow` undefined, so the
 * normaliser denies (fail closed).
 */
function decisionDocument(document: unknown): RawEngineResult {
  const fields = (typeof document === 'object' && document !== null ? document : {}) as Record<string, unknown>;
  return { kind: 'result', allow: fields.allow, failedChecks: fields.failed_checks, denyReason: fields.deny_reason };
}

/** The package path of the one `<pkg>/allow` entrypoint; zero or several is a load error. */
function packageFromEntrypoints(entrypoints: Record<string, number>): string {
  const candidates = Object.keys(entrypoints).filter((name) => name.endsWith('/allow'));
  const only = candidates[0];
  if (candidates.length !== 1 || only === undefined) {
    throw new ProxyError('engine-load-failed', 'policy WASM must have exactly one <pkg>/allow entrypoint');
  }
  return only.slice(0, -'/allow'.length);
}

/** Reads the names of the builtins the module imports from the host (the `builtins()` export). */
function importedBuiltins(internals: PolicyInternals): readonly string[] {
  const exports = internals.wasmInstance.exports as Record<string, unknown>;
  const builtinsFn = exports.builtins;
  const dump = exports.opa_json_dump;
  if (typeof builtinsFn !== 'function' || typeof dump !== 'function') {
    throw new ProxyError('engine-load-failed', 'not an OPA policy module');
  }
  const address = dump(builtinsFn()) as number;
  const bytes = new Uint8Array(internals.mem.buffer);
  let end = address;
  while (bytes[end] !== 0 && end < bytes.length) end++;
  const text = new TextDecoder().decode(bytes.subarray(address, end));
  const names = safeJsonParse(text);
  if (!names.ok || typeof names.value !== 'object' || names.value === null) {
    throw new ProxyError('engine-load-failed', 'policy WASM lists its builtins unreadably');
  }
  return Object.keys(names.value);
}
