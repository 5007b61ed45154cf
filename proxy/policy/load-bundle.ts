import { readFile, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { ProxyError } from '../errors';
import { loadCelEngine } from './cel-engine';
import { compileFetchPlan, type FetchPlan } from './fetch-plan';
import { type Guidance, parseGuidance } from './guidance';
import type { HostBuiltins } from './host-builtins';
import type { PolicyEngine } from './policy-engine';
import { loadRegoEngine } from './rego-engine';
import { safeJsonParse } from './safe-json';

/** A bundle loaded once: its engine, manifest validator, fetch plan and guidance (SPEC §4.3). */
export interface PolicyBundle {
  /** The folder name (`spend-limit`). */
  readonly name: string;
  readonly engine: PolicyEngine;
  /** The manifest: JSON Schema of the whole, closed policy input. */
  readonly manifest: Readonly<Record<string, unknown>>;
  readonly validateInput: ValidateFunction;
  readonly fetchPlan: FetchPlan;
  readonly guidance: Guidance;
}

/** Options for {@link loadBundle}. */
export interface LoadBundleOptions {
  /** The bundle folder. */
  readonly directory: string;
  readonly builtins: HostBuiltins;
  /** Force an engine; by default `policy.wasm` means Rego, else `checks.cel.json` means CEL. */
  readonly engine?: 'rego' | 'cel';
}

/**
 * Loads a bundle folder. Every file is validated here, at startup, so a broken bundle stops the
 * process with a clear error instead of denying (or worse) at the first call.
 */
export async function loadBundle(options: LoadBundleOptions): Promise<PolicyBundle> {
  const directory = options.directory;
  const ajv = new Ajv({ allErrors: true, strict: true });
  const manifest = await readJsonObject(join(directory, 'manifest.json'));
  let validateInput: ValidateFunction;
  try {
    validateInput = ajv.compile(manifest);
  } catch (error) {
    throw new ProxyError('bundle-invalid', `${directory}/manifest.json is not a usable JSON Schema`, { cause: error });
  }
  const fetchPlan = compileFetchPlan(await readJsonObject(join(directory, 'fetchplan.json')), ajv);
  const guidance = parseGuidance(await readJsonObject(join(directory, 'guidance.json')));

  const hasWasm = await exists(join(directory, 'policy.wasm'));
  const hasCel = await exists(join(directory, 'checks.cel.json'));
  const kind = options.engine ?? (hasWasm ? 'rego' : hasCel ? 'cel' : undefined);
  let engine: PolicyEngine;
  if (kind === 'rego') {
    if (!hasWasm)
      throw new ProxyError('bundle-invalid', `${directory} has no policy.wasm (run bash scripts/policies-build.sh)`);
    engine = await loadRegoEngine({ wasm: await readFile(join(directory, 'policy.wasm')), builtins: options.builtins });
  } else if (kind === 'cel') {
    if (!hasCel) throw new ProxyError('bundle-invalid', `${directory} has no checks.cel.json`);
    engine = loadCelEngine({
      checks: await readJsonObject(join(directory, 'checks.cel.json')),
      builtins: options.builtins,
    });
  } else {
    throw new ProxyError('bundle-invalid', `${directory} has neither policy.wasm nor checks.cel.json`);
  }
  return { name: basename(directory), engine, manifest, validateInput, fetchPlan, guidance };
}

async function readJsonObject(path: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new ProxyError('bundle-invalid', `cannot read ${path}`, { cause: error });
  }
  const parsed = safeJsonParse(text);
  if (!parsed.ok || typeof parsed.value !== 'object' || parsed.value === null || Array.isArray(parsed.value)) {
    throw new ProxyError('bundle-invalid', `${path} is not a JSON object`);
  }
  return parsed.value as Record<string, unknown>;
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
