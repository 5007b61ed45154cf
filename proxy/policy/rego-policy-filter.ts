import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ProxyError } from '../errors';
import type { CallFilter, CallRequest, CallVerdict } from '../gateway/types';
import { createHostBuiltins } from './host-builtins';
import { loadRegoEngine } from './rego-engine';

const run = promisify(execFile);

/** Options for {@link regoPolicyFilter}: a `.rego` source (compiled at startup) or a precompiled `.wasm`. */
export type RegoPolicyFilterOptions = (
  | { readonly regoPath: string; readonly wasmPath?: never }
  | { readonly wasmPath: string; readonly regoPath?: never }
) & {
  /** The opa executable used to compile `.rego` (default `opa` on PATH). */
  readonly opaCommand?: string;
  /** Receives evaluation faults and compile fallbacks for logs. */
  readonly onError?: (error: unknown) => void;
};

/**
 * The `rego_policy` call filter (SPEC §3.7). Input `{tool_name, arguments, server_name}`; only
 * `allow === true` allows; `deny_reason` is shown when the policy defines it. A `.rego` path is
 * compiled with opa if available, else its sibling `.wasm` is used, else startup fails clearly.
 */
export async function regoPolicyFilter(options: RegoPolicyFilterOptions): Promise<CallFilter> {
  const wasm =
    options.wasmPath !== undefined
      ? await readWasm(options.wasmPath)
      : await compileOrSibling(options.regoPath, options);
  const engine = await loadRegoEngine({ wasm, builtins: createHostBuiltins(), requireExplanations: false });

  return async function regoPolicy(request: CallRequest): Promise<CallVerdict> {
    const outcome = await engine.evaluate({
      tool_name: request.tool,
      arguments: request.arguments,
      server_name: request.server?.name ?? null,
    });
    if (outcome.decision === 'allow') return { decision: 'allow' };
    if (outcome.decision === 'error') {
      options.onError?.(outcome.error);
      return { decision: 'deny', reason: 'The configured Rego policy could not be evaluated, so the call is refused.' };
    }
    return { decision: 'deny', reason: outcome.reasons[0] ?? 'Refused by the configured Rego policy.' };
  };
}

async function readWasm(path: string): Promise<Uint8Array> {
  try {
    return await readFile(path);
  } catch (error) {
    throw new ProxyError('compile-failed', `rego_policy: cannot read ${path}`, { cause: error });
  }
}

/** Compiles with opa; when opa is not installed, falls back to the sibling precompiled `.wasm`. */
async function compileOrSibling(regoPath: string, options: RegoPolicyFilterOptions): Promise<Uint8Array> {
  const source = await readFile(regoPath, 'utf8').catch((error: unknown) => {
    throw new ProxyError('compile-failed', `rego_policy: cannot read ${regoPath}`, { cause: error });
  });
  const packagePath = /^package\s+([A-Za-z0-9_.]+)/m.exec(source)?.[1]?.replaceAll('.', '/');
  if (!packagePath) throw new ProxyError('compile-failed', `rego_policy: ${regoPath} has no package line`);
  const entrypoints = ['allow', ...(/^deny_reason\b/m.test(source) ? ['deny_reason'] : [])];
  const work = await mkdtemp(join(tmpdir(), 'rego-policy-'));
  try {
    const bundlePath = join(work, 'bundle.tar.gz');
    const args = [
      'build',
      '-t',
      'wasm',
      ...entrypoints.flatMap((name) => ['-e', `${packagePath}/${name}`]),
      '-o',
      bundlePath,
      regoPath,
    ];
    try {
      await run(options.opaCommand ?? 'opa', args, { timeout: 60_000 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        // opa exists but refused the policy: never fall back to a stale precompiled file.
        throw new ProxyError(
          'compile-failed',
          `rego_policy: opa could not compile ${regoPath}: ${(error as { stderr?: string }).stderr ?? ''}`.trim(),
          {
            cause: error,
          },
        );
      }
      const sibling = regoPath.replace(/\.rego$/, '.wasm');
      if (!(await isFile(sibling))) {
        throw new ProxyError(
          'compile-failed',
          `rego_policy: ${regoPath} needs the opa binary to compile (not found on PATH) or a precompiled ${sibling}; run bash scripts/policies-build.sh`,
        );
      }
      options.onError?.(new ProxyError('compile-failed', `rego_policy: opa not found; using precompiled ${sibling}`));
      return await readFile(sibling);
    }
    // -P keeps the member name `/policy.wasm` as OPA writes it; -O streams it instead of writing any path.
    const extracted = await run('tar', ['-xzPf', bundlePath, '-O', '/policy.wasm'], {
      encoding: 'buffer',
      maxBuffer: 64 * 1024 * 1024,
    });
    return new Uint8Array(extracted.stdout);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
