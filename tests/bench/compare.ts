/**
 * `npm run bench:compare -- --baseline <git-rev> [--rounds N] [--only=calls,policy]`: the figures of
 * `npm run bench` for two commits side by side in one run (SPEC §13). The baseline is checked out
 * in a temporary detached worktree; the bench then runs alternately there and in this checkout
 * (baseline, current, baseline, current, …) so drift in the machine's load hits both alike. One
 * JSON document goes to stdout: every run, and the median of each tracked metric per side with a
 * verdict against its budget. Progress and the benches' own stderr go to stderr.
 *
 * The exit code is non-zero only when something failed to run: an over-budget figure is reported,
 * not failed, because one noisy machine is not a verdict on a commit.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  unlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';

/** One step into a run document: an object key, or the array element whose fields equal all of these. */
export type PathStep = string | Readonly<Record<string, string | number>>;

/** How much a metric may grow over the baseline's median and still be within budget (lower is better). */
export type Budget =
  /** At most `maxIncrease` in the metric's own unit. */
  | { readonly kind: 'absolute'; readonly maxIncrease: number }
  /** At most `maxIncrease` times the baseline (0.1 = 10 %). */
  | { readonly kind: 'relative'; readonly maxIncrease: number };

/** A figure tracked across commits: where it sits in `npm run bench`'s JSON, and its budget. */
export interface Metric {
  readonly name: string;
  readonly path: readonly PathStep[];
  readonly unit: string;
  readonly budget: Budget;
}

const callOverheadBudget: Budget = { kind: 'absolute', maxIncrease: 10 };
const tenPercent: Budget = { kind: 'relative', maxIncrease: 0.1 };

/** The metrics compared, one line each. A metric a run does not report is listed as missing. */
// biome-ignore format: a table, one metric per line
export const benchMetrics: readonly Metric[] = [
  { name: 'call_tool added p50, in-memory', path: ['callToolOverhead', { downstream: 'in-memory' }, 'addedP50Us'], unit: 'us', budget: callOverheadBudget },
  { name: 'call_tool added p50, stdio', path: ['callToolOverhead', { downstream: 'stdio' }, 'addedP50Us'], unit: 'us', budget: callOverheadBudget },
  { name: 'search_tools lexical p95, 100 tools', path: ['searchTools', { ranking: 'lexical', tools: 100 }, 'p95Us'], unit: 'us', budget: tenPercent },
  { name: 'search_tools lexical p95, 1000 tools', path: ['searchTools', { ranking: 'lexical', tools: 1_000 }, 'p95Us'], unit: 'us', budget: tenPercent },
  { name: 'search_tools lexical p95, 10000 tools', path: ['searchTools', { ranking: 'lexical', tools: 10_000 }, 'p95Us'], unit: 'us', budget: tenPercent },
  { name: 'search_tools hybrid p95, 100 tools', path: ['searchTools', { ranking: 'hybrid', tools: 100 }, 'p95Us'], unit: 'us', budget: tenPercent },
  { name: 'search_tools hybrid p95, 1000 tools', path: ['searchTools', { ranking: 'hybrid', tools: 1_000 }, 'p95Us'], unit: 'us', budget: tenPercent },
  { name: 'search_tools hybrid p95, 10000 tools', path: ['searchTools', { ranking: 'hybrid', tools: 10_000 }, 'p95Us'], unit: 'us', budget: tenPercent },
  { name: 'policy p99, WASM without crypto', path: ['policy', 'policyEvaluation', 'wasmWithoutCrypto', 'p99Us'], unit: 'us', budget: tenPercent },
  { name: 'policy p99, CEL without crypto', path: ['policy', 'policyEvaluation', 'celWithoutCrypto', 'p99Us'], unit: 'us', budget: tenPercent },
  { name: 'policy p99, WASM regex example', path: ['policy', 'policyEvaluation', 'wasmRegexExample', 'p99Us'], unit: 'us', budget: tenPercent },
  { name: 'policy p99, CEL regex example', path: ['policy', 'policyEvaluation', 'celRegexExample', 'p99Us'], unit: 'us', budget: tenPercent },
  { name: 'policy p99, WASM with crypto', path: ['policy', 'policyEvaluation', 'wasmWithCrypto', 'p99Us'], unit: 'us', budget: tenPercent },
  { name: 'policy p99, CEL with crypto', path: ['policy', 'policyEvaluation', 'celWithCrypto', 'p99Us'], unit: 'us', budget: tenPercent },
];

/** One metric compared: medians, difference and verdict, or which side did not report it. */
export type MetricComparison =
  | {
      readonly metric: string;
      readonly unit: string;
      readonly verdict: 'within' | 'over';
      readonly budget: string;
      readonly baseline: number;
      readonly current: number;
      /** current - baseline, in the metric's unit. */
      readonly difference: number;
      /** The difference in percent of the baseline; null when the baseline is 0. */
      readonly differencePercent: number | null;
      readonly baselineRounds: readonly number[];
      readonly currentRounds: readonly number[];
    }
  | {
      readonly metric: string;
      readonly unit: string;
      readonly verdict: 'missing';
      readonly missingIn: readonly ('baseline' | 'current')[];
      readonly baselineRounds: readonly number[];
      readonly currentRounds: readonly number[];
    };

/** The comparison of all metrics, with a summary naming the ones over budget or missing. */
export interface Comparison {
  readonly summary: { readonly within: number; readonly over: readonly string[]; readonly missing: readonly string[] };
  readonly metrics: readonly MetricComparison[];
}

/**
 * Tolerance of the budget check, in the metric's unit: the figures are decimals held in binary
 * floating point, and a difference exactly at the budget (20.1 → 30.1 against +10) is within it.
 */
const EPSILON = 1e-9;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The number at `path` in a run document, or undefined when any step is absent or it is not a finite number. */
export function metricValue(document: unknown, path: readonly PathStep[]): number | undefined {
  let node: unknown = document;
  for (const step of path) {
    if (typeof step === 'string') {
      node = isRecord(node) && Object.hasOwn(node, step) ? node[step] : undefined;
    } else {
      const fields = Object.entries(step);
      node = Array.isArray(node)
        ? node.find((element) => isRecord(element) && fields.every(([key, value]) => element[key] === value))
        : undefined;
    }
  }
  return typeof node === 'number' && Number.isFinite(node) ? node : undefined;
}

/** The median of `values` (the mean of the middle two for an even count), undefined when empty. */
export function median(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const upper = sorted[middle] ?? 0;
  return sorted.length % 2 === 1 ? upper : ((sorted[middle - 1] ?? upper) + upper) / 2;
}

const round2 = (value: number) => Math.round(value * 100) / 100;

function describeBudget(budget: Budget, unit: string): string {
  return budget.kind === 'absolute' ? `+${budget.maxIncrease} ${unit}` : `+${round2(budget.maxIncrease * 100)} %`;
}

/** Whether `current` stays within `budget` over `baseline`: a growth of exactly the budget is within. */
export function withinBudget(budget: Budget, baseline: number, current: number): boolean {
  const allowed = budget.kind === 'absolute' ? budget.maxIncrease : Math.abs(baseline) * budget.maxIncrease;
  return current - baseline <= allowed + EPSILON;
}

/**
 * Compares the runs of two commits: for each metric present on both sides, the median across
 * rounds per side, their difference and a verdict against the metric's budget. Pure, so it is
 * tested without running a bench.
 */
export function compareRuns(
  baselineRuns: readonly unknown[],
  currentRuns: readonly unknown[],
  metrics: readonly Metric[] = benchMetrics,
): Comparison {
  const compared = metrics.map((metric): MetricComparison => {
    const valuesOf = (runs: readonly unknown[]) =>
      runs.map((run) => metricValue(run, metric.path)).filter((value) => value !== undefined);
    const baselineRounds = valuesOf(baselineRuns);
    const currentRounds = valuesOf(currentRuns);
    const baseline = median(baselineRounds);
    const current = median(currentRounds);
    const common = { metric: metric.name, unit: metric.unit };
    if (baseline === undefined || current === undefined) {
      const missingIn = [
        ...(baseline === undefined ? ['baseline' as const] : []),
        ...(current === undefined ? ['current' as const] : []),
      ];
      return { ...common, verdict: 'missing', missingIn, baselineRounds, currentRounds };
    }
    const difference = current - baseline;
    return {
      ...common,
      verdict: withinBudget(metric.budget, baseline, current) ? 'within' : 'over',
      budget: describeBudget(metric.budget, metric.unit),
      baseline: round2(baseline),
      current: round2(current),
      difference: round2(difference),
      differencePercent: baseline === 0 ? null : Math.round((difference / Math.abs(baseline)) * 1000) / 10,
      baselineRounds,
      currentRounds,
    };
  });
  return {
    summary: {
      within: compared.filter((entry) => entry.verdict === 'within').length,
      over: compared.filter((entry) => entry.verdict === 'over').map((entry) => entry.metric),
      missing: compared.filter((entry) => entry.verdict === 'missing').map((entry) => entry.metric),
    },
    metrics: compared,
  };
}

// ---- Running the benches ----------------------------------------------------------------------

const log = (line: string) => process.stderr.write(`[bench:compare] ${line}\n`);

/** This checkout: the folder holding this file's `tests/`. */
const currentTree = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

const optionsSchema = z.object({
  // A rev that starts with '-' would be read by git as an option.
  baseline: z.string().regex(/^[^-]/, 'a git revision'),
  rounds: z.coerce.number().int().min(1).max(50).default(3),
  only: z
    .string()
    .regex(/^[a-z]+(,[a-z]+)*$/, 'comma-separated part names')
    .optional(),
});

const usage =
  'usage: npm run bench:compare -- --baseline <git-rev> [--rounds N] [--only=calls,policy,search,retrieval,identity,payments]';

function parseOptions(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    options: { baseline: { type: 'string' }, rounds: { type: 'string' }, only: { type: 'string' } },
    strict: true,
  });
  const parsed = optionsSchema.safeParse(values);
  if (!parsed.success) throw new Error(`${z.prettifyError(parsed.error)}\n${usage}`);
  return parsed.data;
}

/** Runs git in this checkout and returns its trimmed stdout; throws with git's stderr on failure. */
function git(args: string[]): string {
  const result = spawnSync('git', args, { cwd: currentTree, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) {
    throw new Error(`git ${args.join(' ')} failed: ${result.stderr.trim() || result.error?.message}`, {
      cause: result.error,
    });
  }
  return result.stdout.trim();
}

/** The child running now, so a signal can stop it before the worktree goes away. */
let activeChild: ChildProcess | undefined;

/** Runs a command to completion; stdout is collected (`capture`) or sent to our stderr, stderr passes through. */
function run(command: string, args: string[], options: { cwd: string; stdout: 'capture' | 'stderr' }) {
  return new Promise<{ status: number | null; stdout: string }>((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      stdio: ['ignore', options.stdout === 'capture' ? 'pipe' : process.stderr, 'inherit'],
    });
    activeChild = child;
    let stdout = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.once('error', reject);
    child.once('close', (status) => {
      activeChild = undefined;
      resolve({ status, stdout });
    });
  });
}

/**
 * The run document in a bench's stdout. The bench writes exactly one JSON document, but a
 * dependency may log to stdout before it, so the text from the first line that is just `{` is
 * taken. This is our own child's output, not untrusted input; it is still checked to be an object.
 */
function parseRunDocument(stdout: string): Record<string, unknown> {
  const start = stdout.search(/^\{$/m);
  if (start < 0) throw new Error(`the bench printed no JSON document: ${stdout.slice(0, 200)}`);
  return z.record(z.string(), z.unknown()).parse(JSON.parse(stdout.slice(start)));
}

/** Runs `tests/bench/run.ts` in `tree` with that tree's own tsx and returns its JSON document. */
async function runBench(tree: string, only: string | undefined): Promise<Record<string, unknown>> {
  const tsx = join(tree, 'node_modules', '.bin', 'tsx');
  const { status, stdout } = await run(tsx, ['tests/bench/run.ts', ...(only ? [`--only=${only}`] : [])], {
    cwd: tree,
    stdout: 'capture',
  });
  if (status !== 0) throw new Error(`the bench in ${tree} exited with ${status}`);
  return parseRunDocument(stdout);
}

/** Links `name` from this checkout into the worktree, when this checkout has it. */
function linkFromCurrent(tree: string, name: string): boolean {
  const source = join(currentTree, name);
  if (!existsSync(source)) return false;
  symlinkSync(realpathSync(source), join(tree, name), 'dir');
  return true;
}

/**
 * Gives the worktree its dependencies: this checkout's `node_modules` by symlink when both lock
 * files are identical (the same packages, so nothing to install), else a fresh `npm ci` there.
 * The staged embedding model is linked either way: it is not part of any commit.
 */
async function provideDependencies(tree: string, commit: string): Promise<void> {
  const currentLock = readFileSync(join(currentTree, 'package-lock.json'), 'utf8');
  let baselineLock: string | undefined;
  try {
    baselineLock = git(['show', `${commit}:package-lock.json`]);
  } catch {
    baselineLock = undefined;
  }
  if (baselineLock === currentLock.trim()) {
    if (!linkFromCurrent(tree, 'node_modules'))
      throw new Error('this checkout has no node_modules: run `npm ci` first');
  } else {
    log('the baseline package-lock.json differs from the current one: running `npm ci` in the baseline worktree');
    const { status } = await run('npm', ['ci'], { cwd: tree, stdout: 'stderr' });
    if (status !== 0) throw new Error(`npm ci in the baseline worktree exited with ${status}`);
  }
  if (!linkFromCurrent(tree, '.models'))
    log('no staged model (.models) in this checkout: hybrid figures are missing on both sides');
}

/**
 * Removes the worktree and its temporary folder. Our symlinks are unlinked first, so nothing
 * that deletes the worktree can ever reach this checkout's `node_modules` or `.models`.
 */
function removeWorktree(folder: string, tree: string): void {
  for (const name of ['node_modules', '.models']) {
    const link = join(tree, name);
    if (existsSync(link) && lstatSync(link).isSymbolicLink()) unlinkSync(link);
  }
  const removed = spawnSync('git', ['worktree', 'remove', '--force', tree], { cwd: currentTree, stdio: 'ignore' });
  rmSync(folder, { recursive: true, force: true });
  // Only when git could not remove it (the worktree was half made): drop its record now the folder is gone.
  if (removed.status !== 0) spawnSync('git', ['worktree', 'prune'], { cwd: currentTree, stdio: 'ignore' });
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const baselineCommit = git(['rev-parse', '--verify', '--end-of-options', `${options.baseline}^{commit}`]);
  const currentCommit = git(['rev-parse', 'HEAD']);
  const dirty = git(['status', '--porcelain']).length > 0;
  const subject = (commit: string) => git(['log', '-1', '--format=%s', commit]);

  const folder = mkdtempSync(join(tmpdir(), 'bench-compare-'));
  const tree = join(folder, 'baseline');
  let cleaned = false;
  const cleanup = () => {
    if (cleaned) return;
    cleaned = true;
    removeWorktree(folder, tree);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping the bench and removing the baseline worktree`);
    activeChild?.kill(signal);
    cleanup();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    log(`baseline ${options.baseline} = ${baselineCommit.slice(0, 12)}: worktree in ${tree}`);
    git(['worktree', 'add', '--detach', tree, baselineCommit]);
    await provideDependencies(tree, baselineCommit);

    const baselineRuns: Record<string, unknown>[] = [];
    const currentRuns: Record<string, unknown>[] = [];
    for (let round = 1; round <= options.rounds; round++) {
      log(`round ${round}/${options.rounds}: baseline (${baselineCommit.slice(0, 12)})`);
      baselineRuns.push(await runBench(tree, options.only));
      log(`round ${round}/${options.rounds}: current (HEAD${dirty ? ', dirty' : ''})`);
      currentRuns.push(await runBench(currentTree, options.only));
    }

    const report = {
      baseline: { rev: options.baseline, commit: baselineCommit, subject: subject(baselineCommit), runs: baselineRuns },
      current: { rev: 'HEAD', commit: currentCommit, dirty, subject: subject(currentCommit), runs: currentRuns },
      comparison: { rounds: options.rounds, only: options.only ?? null, ...compareRuns(baselineRuns, currentRuns) },
    };
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } finally {
    cleanup();
  }
}

// Run only as a script: the unit test imports the pure functions above without running benches.
const entry = process.argv[1];
if (entry !== undefined && existsSync(entry) && import.meta.url === pathToFileURL(realpathSync(entry)).href) {
  main().catch((error: unknown) => {
    log(`failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  });
}
