/**
 * One process of `evidence-store-processes.test.ts`: opens the SQLite evidence store at argv[2] and
 * prints `ready`. Each `go <id>` line on stdin then starts one round: argv[3] concurrent
 * reserve-then-commit attempts on that evidence id, answered by one JSON {@link WorkerReport} line.
 * The parent sends a round's `go` to every process at once, which is the barrier that lines them up.
 *
 *   node --import tsx tests/policy/evidence-store-worker.ts <store.sqlite> <attempts per round>
 */
import { createInterface } from 'node:readline';
import { openSqliteEvidenceStore } from '../../proxy/policy/index';

/** How a round's attempts ended: committed (it spent the evidence), refused as spent, or anything else. */
interface WorkerReport {
  readonly id: string;
  readonly committed: number;
  readonly spent: number;
  readonly other: readonly string[];
}

const [path, attemptsText] = process.argv.slice(2);
if (!path || !attemptsText) throw new Error('usage: evidence-store-worker <store.sqlite> <attempts per round>');
const attempts = Number(attemptsText);

const store = openSqliteEvidenceStore({ path, capacity: 100_000 });

/** Fires every attempt of one round at once; they only settle after all have started. */
async function round(id: string): Promise<WorkerReport> {
  // Far in the future: nothing may expire or be purged while the processes race.
  const expiresAt = Date.now() + 3_600_000;
  const outcomes = await Promise.all(
    Array.from({ length: attempts }, async (): Promise<string> => {
      try {
        const reserved = await store.reserve([{ id, expiresAt }], Date.now());
        if (!reserved.ok) return reserved.reason;
        await store.commit(reserved.reservation);
        return 'committed';
      } catch (error) {
        return `error: ${error instanceof Error ? error.message : String(error)}`;
      }
    }),
  );
  return {
    id,
    committed: outcomes.filter((outcome) => outcome === 'committed').length,
    spent: outcomes.filter((outcome) => outcome === 'spent').length,
    other: outcomes.filter((outcome) => outcome !== 'committed' && outcome !== 'spent'),
  };
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const id = /^go (\S+)$/.exec(line)?.[1];
  if (id === undefined) return;
  void round(id).then((report) => process.stdout.write(`${JSON.stringify(report)}\n`));
});
lines.once('close', () => {
  void store.close();
});
process.stdout.write('ready\n');
