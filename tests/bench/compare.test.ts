import { describe, expect, it } from 'vitest';
import { benchMetrics, compareRuns, type Metric, median, metricValue, withinBudget } from './compare';

/** A run document shaped like `npm run bench`'s output, with only the figures these tests use. */
function benchRun(figures: { inMemoryAddedP50?: number; lexical100P95?: number; wasmP99?: number }) {
  return {
    machine: { node: 'v20', platform: 'linux-x64', cpus: 4 },
    searchTools:
      figures.lexical100P95 === undefined
        ? []
        : [
            { ranking: 'lexical', mode: 'lexical', tools: 100, samples: 50, p50Us: 1, p95Us: figures.lexical100P95 },
            { ranking: 'lexical', mode: 'lexical', tools: 1_000, samples: 50, p50Us: 1, p95Us: 999 },
          ],
    callToolOverhead:
      figures.inMemoryAddedP50 === undefined
        ? []
        : [
            { downstream: 'in-memory', addedP50Us: figures.inMemoryAddedP50, addedP95Us: 0 },
            { downstream: 'stdio', addedP50Us: 500, addedP95Us: 0 },
          ],
    ...(figures.wasmP99 !== undefined && {
      policy: { policyEvaluation: { wasmWithoutCrypto: { p50Us: 1, p99Us: figures.wasmP99, iterations: 10 } } },
    }),
  };
}

const inMemory: Metric = {
  name: 'call_tool added p50, in-memory',
  path: ['callToolOverhead', { downstream: 'in-memory' }, 'addedP50Us'],
  unit: 'us',
  budget: { kind: 'absolute', maxIncrease: 10 },
};
const lexical100: Metric = {
  name: 'search_tools lexical p95, 100 tools',
  path: ['searchTools', { ranking: 'lexical', tools: 100 }, 'p95Us'],
  unit: 'us',
  budget: { kind: 'relative', maxIncrease: 0.1 },
};
const wasm: Metric = {
  name: 'policy p99, WASM without crypto',
  path: ['policy', 'policyEvaluation', 'wasmWithoutCrypto', 'p99Us'],
  unit: 'us',
  budget: { kind: 'relative', maxIncrease: 0.1 },
};

describe('median', () => {
  it('takes the middle value of an odd count regardless of order', () => {
    expect(median([30, 10, 20])).toBe(20);
  });
  it('averages the middle two of an even count', () => {
    expect(median([40, 10, 30, 20])).toBe(25);
  });
  it('is undefined for no values', () => {
    expect(median([])).toBeUndefined();
  });
});

describe('metricValue', () => {
  const run = benchRun({ inMemoryAddedP50: 42, lexical100P95: 800 });
  it('selects the array element whose fields match, not the first one', () => {
    expect(metricValue(run, ['callToolOverhead', { downstream: 'stdio' }, 'addedP50Us'])).toBe(500);
    expect(metricValue(run, ['searchTools', { ranking: 'lexical', tools: 1_000 }, 'p95Us'])).toBe(999);
  });
  it('is undefined when a step is absent, the value is not a number, or the document is not an object', () => {
    expect(metricValue(run, ['searchTools', { ranking: 'hybrid', tools: 100 }, 'p95Us'])).toBeUndefined();
    expect(metricValue(run, ['policy', 'policyEvaluation', 'wasmWithoutCrypto', 'p99Us'])).toBeUndefined();
    expect(metricValue(run, ['machine', 'node'])).toBeUndefined();
    expect(metricValue('not a run', ['machine'])).toBeUndefined();
  });
  it('does not walk into inherited properties', () => {
    expect(metricValue({}, ['constructor', 'length'])).toBeUndefined();
  });
});

describe('withinBudget', () => {
  const absolute = { kind: 'absolute', maxIncrease: 10 } as const;
  const relative = { kind: 'relative', maxIncrease: 0.1 } as const;
  it('counts a growth of exactly the absolute budget as within, even where floating point overshoots', () => {
    // 30.1 - 20.1 is 10.000000000000002 in binary floating point.
    expect(withinBudget(absolute, 20.1, 30.1)).toBe(true);
    expect(withinBudget(absolute, 20.1, 30.2)).toBe(false);
    expect(withinBudget(absolute, -3, 7)).toBe(true);
    expect(withinBudget(absolute, -3, 7.1)).toBe(false);
  });
  it('counts a growth of exactly the relative budget as within', () => {
    expect(withinBudget(relative, 100, 110)).toBe(true);
    expect(withinBudget(relative, 100, 110.1)).toBe(false);
    // 0.33 - 0.3 is larger than 0.3 * 0.1 in binary floating point.
    expect(withinBudget(relative, 0.3, 0.33)).toBe(true);
  });
  it('always allows getting faster', () => {
    expect(withinBudget(relative, 100, 1)).toBe(true);
    expect(withinBudget(absolute, 100, -100)).toBe(true);
  });
});

describe('compareRuns', () => {
  it('compares the medians across rounds, not the means or the last round', () => {
    const baseline = [100, 900, 120].map((p95) => benchRun({ lexical100P95: p95 }));
    const current = [125, 140, 10].map((p95) => benchRun({ lexical100P95: p95 }));
    const { metrics, summary } = compareRuns(baseline, current, [lexical100]);
    expect(metrics).toEqual([
      {
        metric: lexical100.name,
        unit: 'us',
        verdict: 'within',
        budget: '+10 %',
        baseline: 120,
        current: 125,
        difference: 5,
        differencePercent: 4.2,
        baselineRounds: [100, 900, 120],
        currentRounds: [125, 140, 10],
      },
    ]);
    expect(summary).toEqual({ within: 1, over: [], missing: [] });
  });

  it('averages the middle two rounds of an even count', () => {
    const baseline = [10, 20].map((added) => benchRun({ inMemoryAddedP50: added }));
    const current = [30, 40].map((added) => benchRun({ inMemoryAddedP50: added }));
    expect(compareRuns(baseline, current, [inMemory]).metrics[0]).toMatchObject({
      baseline: 15,
      current: 35,
      difference: 20,
      verdict: 'over',
    });
  });

  it('puts the verdict at the budget edges: +10 us and +10 % are within, a little more is over', () => {
    const at = (baselineFigures: Parameters<typeof benchRun>[0], currentFigures: Parameters<typeof benchRun>[0]) =>
      compareRuns([benchRun(baselineFigures)], [benchRun(currentFigures)], [inMemory, lexical100, wasm]).metrics.map(
        (entry) => entry.verdict,
      );
    expect(
      at(
        { inMemoryAddedP50: 20.1, lexical100P95: 1_000, wasmP99: 50 },
        { inMemoryAddedP50: 30.1, lexical100P95: 1_100, wasmP99: 55 },
      ),
    ).toEqual(['within', 'within', 'within']);
    expect(
      at(
        { inMemoryAddedP50: 20.1, lexical100P95: 1_000, wasmP99: 50 },
        { inMemoryAddedP50: 30.2, lexical100P95: 1_100.1, wasmP99: 55.1 },
      ),
    ).toEqual(['over', 'over', 'over']);
  });

  it('lists a metric missing on either side as missing, naming the side, instead of failing', () => {
    const baseline = [benchRun({ inMemoryAddedP50: 40, wasmP99: 50 })];
    const current = [benchRun({ lexical100P95: 300, wasmP99: 45 })];
    const { metrics, summary } = compareRuns(baseline, current, [inMemory, lexical100, wasm]);
    expect(metrics.map((entry) => [entry.verdict, 'missingIn' in entry ? entry.missingIn : undefined])).toEqual([
      ['missing', ['current']],
      ['missing', ['baseline']],
      ['within', undefined],
    ]);
    expect(summary).toEqual({ within: 1, over: [], missing: [inMemory.name, lexical100.name] });
  });

  it('takes the median over the rounds that reported a metric, and survives runs that are not objects', () => {
    const baseline = [benchRun({ wasmP99: 50 }), benchRun({}), null, benchRun({ wasmP99: 60 })];
    const current = [benchRun({ wasmP99: 70 })];
    expect(compareRuns(baseline, current, [wasm]).metrics[0]).toMatchObject({
      baseline: 55,
      baselineRounds: [50, 60],
      verdict: 'over',
    });
  });

  it('reads the default metric table from real-shaped runs; figures a run lacks are missing', () => {
    const run = benchRun({ inMemoryAddedP50: 40, lexical100P95: 300, wasmP99: 50 });
    const { summary, metrics } = compareRuns([run], [run]);
    expect(metrics).toHaveLength(benchMetrics.length);
    expect(summary.over).toEqual([]);
    expect(summary.within).toBe(5);
    expect(summary.missing).toContain('search_tools hybrid p95, 10000 tools');
  });
});
