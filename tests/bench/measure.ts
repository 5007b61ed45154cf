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
