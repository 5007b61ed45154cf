import { writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { startThrowawayPostgres } from '../support/throwaway-postgres';
import { summarise } from './measure';
import {
  createDatabase,
  type MeasuredPhase,
  postgresRoundTrips,
  type TimedOrders,
  wholeOrder,
  wholeOrderOnTwoInstances,
} from './payments-bench';

/**
 * Where the whole $15 order's server time goes (issue 28), only the two order lines of the
 * payments bench: one household on SQLite and two on one PostgreSQL database, `--rounds` times
 * (nine measured orders each: ten invoices a minute is the per-chat limit), the steps pooled.
 * Prints each step's wall time and this process's CPU time (p50, p99). With `--statements`, every
 * statement this process sends to PostgreSQL during a step is counted (the pool's clients are
 * wrapped), by what it runs; with `--profile DIR`, a CPU profile of each round's measured orders
 * is written there (read it with `hot-frames.ts`).
 * `npx tsx tests/bench/profile-order.ts [--instances one|two|both] [--rounds 3] [--statements] [--profile DIR]`.
 */
const { values } = parseArgs({
  options: {
    instances: { type: 'string', default: 'both' },
    rounds: { type: 'string', default: '1' },
    statements: { type: 'boolean', default: false },
    profile: { type: 'string' },
  },
});
const rounds = Number(values.rounds);
if (!['one', 'two', 'both'].includes(values.instances ?? '') || !Number.isInteger(rounds) || rounds < 1) {
  throw new Error('usage: profile-order.ts [--instances one|two|both] [--rounds N] [--statements] [--profile DIR]');
}

/** What a statement runs, for counting: the function it calls, else its verb and first table. */
function statementKind(text: string): string {
  const called = /^SELECT [^(]*?\bFROM (\w+)\(|^SELECT (\w+)\(/.exec(text);
  if (called?.[1] ?? called?.[2]) return `${called[1] ?? called[2]}()`;
  const verb = /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase() ?? '?';
  if (['BEGIN', 'COMMIT', 'ROLLBACK'].includes(verb)) return verb;
  const table = /\b(?:FROM|INTO|UPDATE)\s+(\w+)/i.exec(text)?.[1];
  return table === undefined ? text.slice(0, 40) : `${verb} ${table}`;
}

/** Every statement this process sends (monotonic µs when sent), when `--statements` asks for them. */
const sent: { at: number; kind: string }[] = [];
if (values.statements) {
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  (pg.Client.prototype as unknown as { query: unknown }).query = function counted(this: pg.Client, ...args: unknown[]) {
    const first = args[0] as string | { text?: string } | undefined;
    const text = typeof first === 'string' ? first : (first?.text ?? '');
    sent.push({ at: Number(process.hrtime.bigint() / 1000n), kind: statementKind(text) });
    return query.apply(this, args);
  };
}

type Arm = 'one' | 'two';
const steps: Record<Arm, Map<string, { wall: bigint[]; cpu: bigint[]; statements: Map<string, number> }>> = {
  one: new Map(),
  two: new Map(),
};
const figures: Record<Arm, TimedOrders[]> = { one: [], two: [] };
/** Every measured order's server time, pooled over the rounds. */
const orders: Record<Arm, bigint[]> = { one: [], two: [] };
const session = new Session();
session.connect();

/** The measured phase of one round: each step's figures and statements, and the profile when asked for. */
function phase(arm: Arm, round: number): MeasuredPhase {
  return {
    async start() {
      if (values.profile === undefined) return;
      await session.post('Profiler.enable');
      await session.post('Profiler.start');
    },
    async stop() {
      if (values.profile === undefined) return;
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(join(values.profile, `${arm}-${round}.cpuprofile`), JSON.stringify(profile));
    },
    order(nanoseconds) {
      orders[arm].push(nanoseconds);
    },
    step(name, taken) {
      const entry = steps[arm].get(name) ?? { wall: [], cpu: [], statements: new Map<string, number>() };
      steps[arm].set(name, entry);
      entry.wall.push(taken.endNs - taken.startNs);
      entry.cpu.push(BigInt(taken.cpuUs) * 1000n);
      const [from, to] = [Number(taken.startNs / 1000n), Number(taken.endNs / 1000n)];
      for (const statement of sent) {
        if (statement.at >= from && statement.at <= to) {
          entry.statements.set(statement.kind, (entry.statements.get(statement.kind) ?? 0) + 1);
        }
      }
    },
  };
}

if (values.profile !== undefined) await mkdir(values.profile, { recursive: true });
const cluster = values.instances === 'one' ? undefined : startThrowawayPostgres({ durable: true });
const loadBefore = loadavg()[0];
let roundTrips: Awaited<ReturnType<typeof postgresRoundTrips>> | undefined;
try {
  for (let round = 0; round < rounds; round++) {
    if (values.instances !== 'two') figures.one.push(await wholeOrder(9, phase('one', round)));
    if (cluster !== undefined) {
      const url = await createDatabase(cluster.url, `household${round}`);
      figures.two.push(await wholeOrderOnTwoInstances(9, url, phase('two', round)));
    }
    sent.length = 0;
  }
  if (cluster !== undefined) roundTrips = await postgresRoundTrips(await createDatabase(cluster.url, 'round_trips'));
} finally {
  cluster?.stop();
}

const ms = (us: number) => Math.round(us / 100) / 10;
const report = Object.fromEntries(
  (['one', 'two'] as const)
    .filter((arm) => figures[arm].length > 0)
    .map((arm) => {
      const measured = [...steps[arm]].map(([name, entry]) => {
        const wall = summarise(entry.wall);
        const cpu = summarise(entry.cpu);
        const orders = entry.wall.length;
        const statements = [...entry.statements].sort((a, b) => b[1] - a[1]);
        return [
          name,
          {
            wallP50Ms: ms(wall.p50Us),
            wallP99Ms: ms(wall.p99Us),
            cpuP50Ms: ms(cpu.p50Us),
            ...(values.statements &&
              arm === 'two' && {
                statements: Math.round((statements.reduce((sum, [, count]) => sum + count, 0) / orders) * 10) / 10,
                byKind: Object.fromEntries(
                  statements.map(([kind, count]) => [kind, Math.round((count / orders) * 10) / 10]),
                ),
              }),
          },
        ];
      });
      const order = summarise(orders[arm]);
      return [
        arm === 'one' ? 'oneInstanceOnSqlite' : 'twoInstancesOnPostgres',
        {
          order: { samples: order.samples, p50Ms: ms(order.p50Us), p99Ms: ms(order.p99Us) },
          orderP50MsPerRound: figures[arm].map((figure) => ms(figure.p50Us)),
          cpuMsPerOrderPerRound: figures[arm].map((figure) => figure.cpuMsPerOrder),
          steps: Object.fromEntries(measured),
        },
      ];
    }),
);
process.stdout.write(
  `${JSON.stringify({ loadAverage: { before: loadBefore, after: loadavg()[0] }, rounds, ...report, postgresRoundTrips: roundTrips }, null, 2)}\n`,
);
process.exit(0);
