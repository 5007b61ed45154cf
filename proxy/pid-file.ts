import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, realpathSync, unlinkSync, writeSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { ProxyError } from './errors';

/**
 * The running proxy's pid file, beside its config (`config.json.pid`). It holds the pid, a
 * random instance id, the absolute config path and the process's start time as the kernel
 * reports it. A pid alone is not an identity: after a crash the number can be reused by any
 * process, and SIGHUP's default action kills. (pid, start time) is unique per boot, and the
 * start time comes from the kernel, not from the process, so a stale file whose pid was reused
 * never matches; the config path must match too, so a proxy for another config is not signalled.
 */
export function pidFilePath(configPath: string): string {
  return `${canonical(configPath)}.pid`;
}

/** The config's real path, so a symlinked path and the real one find the same pid file. */
function canonical(configPath: string): string {
  try {
    return realpathSync(configPath);
  } catch {
    return resolve(configPath);
  }
}

const recordSchema = z.strictObject({
  pid: z.number().int().positive(),
  instance: z.string().regex(/^[0-9a-f]{32}$/),
  config: z.string().min(1),
  started: z.string().min(1),
});

/** What the pid file says. */
export type PidRecord = z.infer<typeof recordSchema>;

/**
 * The start time of process `pid` as the kernel reports it, or `undefined` when it cannot be
 * read (no such process, or no known way on this platform). Linux: boot id plus field 22 of
 * `/proc/<pid>/stat` (clock ticks since boot). Elsewhere: `ps -o lstart=` (one-second
 * resolution; still distinguishes a reused pid from the original in practice).
 */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: fields follow the last ")".
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = fields[19];
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    return ticks === undefined ? undefined : `linux:${boot}:${ticks}`;
  } catch {
    // Not Linux, or no such process.
  }
  if (process.platform === 'win32' || process.platform === 'linux') return undefined;
  try {
    const started = execFileSync('ps', ['-o', 'lstart=', '-p', String(pid)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    return started === '' ? undefined : `ps:${started}`;
  } catch {
    return undefined;
  }
}

/** Why a pid file does not name a live proxy for a config, or that it does. */
export type PidFileCheck =
  | { readonly live: true; readonly record: PidRecord }
  | { readonly live: false; readonly reason: 'missing' | 'unreadable' | 'garbage' | 'dead' | 'foreign' };

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: alive but another user's process, which is not a proxy we may signal.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Reads the pid file for `configPath` and checks, in order: it parses as a record; it names
 * this config; the pid is alive; the kernel's start time for that pid equals the recorded one.
 * Anything short of all four is not a live proxy for this config (fails closed: never signal).
 */
export function checkPidFile(configPath: string): PidFileCheck {
  let text: string;
  try {
    text = readFileSync(pidFilePath(configPath), 'utf8');
  } catch (error) {
    return { live: false, reason: (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : 'unreadable' };
  }
  let record: PidRecord;
  try {
    const parsed = recordSchema.safeParse(JSON.parse(text));
    if (!parsed.success) return { live: false, reason: 'garbage' };
    record = parsed.data;
  } catch {
    return { live: false, reason: 'garbage' };
  }
  if (record.config !== canonical(configPath)) return { live: false, reason: 'foreign' };
  if (!isAlive(record.pid)) return { live: false, reason: 'dead' };
  if (record.pid === process.pid || processStartTime(record.pid) !== record.started) {
    return { live: false, reason: 'foreign' };
  }
  return { live: true, record };
}

/** A pid file this process holds. */
export interface HeldPidFile {
  readonly path: string;
  /** Removes the file if it is still ours. */
  release(): void;
}

function createExclusive(path: string, text: string): boolean {
  let descriptor: number;
  try {
    descriptor = openSync(path, 'wx', 0o644);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
  try {
    writeSync(descriptor, text);
  } finally {
    closeSync(descriptor);
  }
  return true;
}

/**
 * Takes the pid file for `configPath`, refusing when a live proxy for the same config holds it
 * (SPEC §3.9: a second proxy on the same config is refused). Node has no `flock`, so the lock is
 * an exclusive create (`O_CREAT|O_EXCL`, atomic on local file systems) plus verification of the
 * holder: a file whose holder is dead, garbage or foreign is stale and replaced once. Reading
 * the file back confirms we won a concurrent takeover. Residual race: two proxies starting in
 * the same instant over a stale file; the one that reads back another's record refuses.
 */
export function acquirePidFile(configPath: string): HeldPidFile {
  const path = pidFilePath(configPath);
  const started = processStartTime(process.pid) ?? 'unknown';
  const record: PidRecord = {
    pid: process.pid,
    instance: randomBytes(16).toString('hex'),
    config: canonical(configPath),
    started,
  };
  const text = `${JSON.stringify(record)}\n`;
  for (let attempt = 0; attempt < 2; attempt += 1) {
    if (createExclusive(path, text)) break;
    const holder = checkPidFile(configPath);
    if (holder.live) {
      throw new ProxyError(
        'proxy-already-running',
        `Another extensible-mcp (pid ${holder.record.pid}) is already serving ${record.config} (pid file ${path}). Stop it first, or use another config.`,
      );
    }
    // Stale: dead, garbage or someone else's pid. Remove it and try the exclusive create again.
    try {
      unlinkSync(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  let current = '';
  try {
    current = readFileSync(path, 'utf8');
  } catch {
    // Handled below: not ours.
  }
  if (current !== text) {
    throw new ProxyError(
      'proxy-already-running',
      `Another extensible-mcp is starting on ${record.config} (pid file ${path}); refusing to run a second one.`,
    );
  }
  return {
    path,
    release() {
      try {
        if (readFileSync(path, 'utf8') === text) unlinkSync(path);
      } catch {
        // Gone already.
      }
    },
  };
}

/** The outcome of {@link signalRunningProxy}. */
export type SignalOutcome =
  | { readonly signalled: true; readonly pid: number }
  | { readonly signalled: false; readonly reason: Exclude<PidFileCheck, { live: true }>['reason'] };

/** Sends SIGHUP to the proxy serving `configPath`, only if the pid file verifiably names one. */
export function signalRunningProxy(configPath: string): SignalOutcome {
  const check = checkPidFile(configPath);
  if (!check.live) return { signalled: false, reason: check.reason };
  process.kill(check.record.pid, 'SIGHUP');
  return { signalled: true, pid: check.record.pid };
}
