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
