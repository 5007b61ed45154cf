import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openSqliteEvidenceStore } from '../../proxy/policy/index';

/**
 * SPEC §4.7: the check-and-spend is atomic "across processes sharing the store". Two real processes
 * open one SQLite file and race reserve + commit on the same evidence id; exactly one may spend it.
 */

const WORKER = 'tests/policy/evidence-store-worker.ts';
const ATTEMPTS_PER_PROCESS = 25;
/**
 * Each round is a fresh id raced by both processes. A racy check-then-write can only lose at a round's
 * first attempts, a window of microseconds, so many cheap rounds are what give it a chance to show.
 */
const ROUNDS = 300;
const reportSchema = z.object({
  id: z.string(),
  committed: z.number(),
  spent: z.number(),
  other: z.array(z.string()),
});
type Report = z.infer<typeof reportSchema>;

/** A worker process, read one stdout line at a time. */
interface Worker {
  send(line: string): void;
  /** The next line it prints; rejects with its stderr if it exits first. */
  nextLine(): Promise<string>;
  stop(): Promise<void>;
}

function startWorker(path: string): Worker {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, path, String(ATTEMPTS_PER_PROCESS)]);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    send: (line) => child.stdin.write(`${line}\n`),
    async nextLine() {
      const next = await lines.next();
      if (next.done) throw new Error(`worker exited early: ${stderr}`);
      return next.value;
    },
    async stop() {
      child.stdin.end();
      await exited;
    },
  };
}

describe('SQLite evidence store shared by two processes', () => {
  const folders: string[] = [];
  afterEach(() => {
    for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
  });

  it(`${2 * ATTEMPTS_PER_PROCESS} concurrent reserve + commit of one id across two processes spend it exactly once (${ROUNDS} rounds)`, async () => {
    const folder = mkdtempSync(join(tmpdir(), 'evidence-processes-'));
    folders.push(folder);
    const path = join(folder, 'evidence.sqlite');
    const workers = [startWorker(path), startWorker(path)];
    const ids: string[] = [];
    try {
      // Barrier: both stores are open before either process makes its first attempt.
      expect(await Promise.all(workers.map((worker) => worker.nextLine()))).toEqual(['ready', 'ready']);
      for (let round = 0; round < ROUNDS; round++) {
        const id = `urn:uuid:${randomUUID()}`;
        ids.push(id);
        // Each round starts in both processes on the same `go`, and ends when both have reported.
        for (const worker of workers) worker.send(`go ${id}`);
        const reports: Report[] = await Promise.all(
          workers.map(async (worker) => reportSchema.parse(JSON.parse(await worker.nextLine()))),
        );
        // One spend in total, whichever process won; every other attempt refused as spent, none failing otherwise.
        expect({
          id,
          committed: reports.reduce((sum, report) => sum + (report.id === id ? report.committed : 0), 0),
          spent: reports.reduce((sum, report) => sum + (report.id === id ? report.spent : 0), 0),
          other: reports.flatMap((report) => report.other),
        }).toEqual({ id, committed: 1, spent: 2 * ATTEMPTS_PER_PROCESS - 1, other: [] });
      }
    } finally {
      await Promise.all(workers.map((worker) => worker.stop()));
    }

    // The spends are durable and visible to a new connection (this process) opening the same file.
    const store = openSqliteEvidenceStore({ path, capacity: 100_000 });
    try {
      for (const id of ids) {
        expect(await store.isSpent(id, Date.now())).toBe(true);
        expect(await store.reserve([{ id, expiresAt: Date.now() + 60_000 }], Date.now())).toMatchObject({
          ok: false,
          reason: 'spent',
        });
      }
    } finally {
      await store.close();
    }
  });
});
