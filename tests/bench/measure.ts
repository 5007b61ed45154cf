import { readdirSync, readFileSync } from 'node:fs';

/** Latency summary in microseconds. */
export interface Latency {
  readonly samples: number;
  readonly p50Us: number;
  readonly p95Us: number;
  readonly p99Us: number;
}

/** Percentiles of durations given in nanoseconds, reported in microseconds (1 decimal). */
export function summarise(nanoseconds: readonly bigint[]): Latency {
  const sorted = [...nanoseconds].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const at = (fraction: number) => {
    const value = sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] ?? 0n;
    return Math.round(Number(value) / 100) / 10;
  };
  return { samples: sorted.length, p50Us: at(0.5), p95Us: at(0.95), p99Us: at(0.99) };
}

/** Runs `operation` `warmup` times unmeasured, then `iterations` times measured (sequentially). */
export async function measure(
  operation: (iteration: number) => Promise<unknown>,
  options: { iterations: number; warmup?: number },
): Promise<Latency> {
  for (let iteration = 0; iteration < (options.warmup ?? 0); iteration++) await operation(iteration);
  const durations: bigint[] = [];
  for (let iteration = 0; iteration < options.iterations; iteration++) {
    const start = process.hrtime.bigint();
    await operation(iteration);
    durations.push(process.hrtime.bigint() - start);
  }
  return summarise(durations);
}

/**
 * Measures several operations in alternation (a, b, a, b, …), so drift in the machine's load
 * during the run affects each of them alike: the fair way to compare two paths side by side.
 */
export async function measureInterleaved<Name extends string>(
  operations: Record<Name, () => Promise<unknown>>,
  options: { iterations: number; warmup?: number },
): Promise<Record<Name, Latency>> {
  const entries = Object.entries(operations) as [Name, () => Promise<unknown>][];
  for (let iteration = 0; iteration < (options.warmup ?? 0); iteration++) {
    for (const [, operation] of entries) await operation();
  }
  const durations = new Map<Name, bigint[]>(entries.map(([name]) => [name, []]));
  for (let iteration = 0; iteration < options.iterations; iteration++) {
    for (const [name, operation] of entries) {
      const start = process.hrtime.bigint();
      await operation();
      durations.get(name)?.push(process.hrtime.bigint() - start);
    }
  }
  return Object.fromEntries(entries.map(([name]) => [name, summarise(durations.get(name) ?? [])])) as Record<
    Name,
    Latency
  >;
}

/** The fields of a process's `/proc/PID/stat` from its state (field 3) on. */
export function statFields(pid: number | string): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** Every process's parent, from `/proc` (field 4 of stat(5)); processes that end while it is read are left out. */
function parents(): Map<number, number> {
  const parentOf = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      parentOf.set(Number(entry), Number(statFields(entry)[1]));
    } catch {
      // The process ended while the list was read.
    }
  }
  return parentOf;
}

/** CPU seconds of a PostgreSQL cluster: the postmaster with its reaped children, and every live backend. */
export function clusterCpuSeconds(postmasterPid: number): number {
  const own = statFields(postmasterPid);
  // utime, stime, cutime, cstime are fields 14 to 17 of stat(5); the list starts at field 3.
  let ticks = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
  for (const [pid, parent] of parents()) {
    if (parent !== postmasterPid) continue;
    try {
      const fields = statFields(pid);
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // The backend ended while the list was read.
    }
  }
  return ticks / 100;
}

/** CPU seconds of every live process below `pid` (children, their children, …), in clock ticks of 1/100 s. */
export function descendantsCpuSeconds(pid: number): number {
  const parentOf = parents();
  let ticks = 0;
  for (const [child] of parentOf) {
    let at = parentOf.get(child);
    while (at !== undefined && at !== pid && at > 1) at = parentOf.get(at);
    if (at !== pid) continue;
    try {
      const fields = statFields(child);
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // The process ended while the list was read.
    }
  }
  return ticks / 100;
}
