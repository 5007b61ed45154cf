import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditCheckpointsFileName } from '../../lib/audit/audit-checkpoints';
import type { HouseholdEvent } from '../../lib/events';
import { copyDataFolder, editAndRecompute, tamperWith } from '../audit/tamper';
import { startTestHousehold } from '../payments/household';
import { auditVerify, checkpointLines } from './fixtures/audit-verify';

// Issue 26, defect 1: with the app stopped, rows after the newest checkpoint were edited and their
// hashes recomputed; at the next start the app signed a checkpoint over the current head without
// verifying the chain from the previous checkpoint, and `npm run audit:verify` then passed over the
// tampered row. A real household process is killed mid-order (so no closing checkpoint covers its
// last rows), the tamperer rewrites the SQLite file, and a new household starts on it.
const root = fileURLToPath(new URL('../..', import.meta.url));
const folders: string[] = [];
let dataDir = '';
/** A copy of the killed household's folder, before anything started on it again. */
let pristine = '';
/** The newest checkpoint the killed process left, and the head it reached. */
let checkpointRow = 0;
let killedHead = 0;

/** Runs the killed-household fixture and kills it (SIGKILL) once it printed its head. */
function killedHousehold(folder: string): Promise<number> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'tests/security/fixtures/killed-household.ts', folder], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  let printed = false;
  return new Promise((resolve, reject) => {
    const exited = new Promise<void>((done) => child.once('exit', () => done()));
    child.stderr.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
    });
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const line = text.split('\n').find((candidate) => candidate.startsWith('{"head"'));
      if (line === undefined || printed) return;
      printed = true;
      const { head } = JSON.parse(line) as { head: { rowId: number } };
      child.kill('SIGKILL');
      void exited.then(() => resolve(head.rowId));
    });
    void exited.then(() => {
      if (!printed) reject(new Error(`the household exited before it printed its head:\n${text}`));
    });
  });
}

/** Starts a household on `folder` again, as the app's next start would, and stops it in order. */
async function restart(folder: string): Promise<HouseholdEvent[]> {
  const events: HouseholdEvent[] = [];
  const household = await startTestHousehold({ dataDir: folder, enrol: false, onEvent: (event) => events.push(event) });
  await household.close();
  return events;
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'tampered-at-rest-'));
  folders.push(dataDir);
  killedHead = await killedHousehold(dataDir);
  const lines = await checkpointLines(join(dataDir, auditCheckpointsFileName));
  checkpointRow = lines.at(-1)?.rowId ?? 0;
  // The ground the issue describes: signed rows, then rows no checkpoint covers.
  expect(checkpointRow).toBeGreaterThan(0);
  expect(killedHead).toBeGreaterThan(checkpointRow + 2);
  pristine = copyDataFolder(dataDir);
  folders.push(pristine);
}, 240_000);

afterAll(async () => {
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

describe('a chain rewritten while the household was stopped', () => {
  it('rows after the newest checkpoint edited and recomputed: the start signs nothing over them, says so, and audit:verify fails naming them', async () => {
    tamperWith(dataDir, (database) => editAndRecompute(database, checkpointRow + 2));
    const before = await readFile(join(dataDir, auditCheckpointsFileName), 'utf8');

    const events = await restart(dataDir);

    // No checkpoint was signed over the tampered head, nor over any row of the rewritten tail.
    const signedSince = (await checkpointLines(join(dataDir, auditCheckpointsFileName))).slice(
      before.split('\n').filter(Boolean).length,
    );
    expect(signedSince.map((line) => line.rowId)).not.toContain(killedHead);
    for (const line of signedSince) expect(line.rowId).toBeGreaterThan(killedHead);
    // The start said why, in words, in the chain itself (the next row after the tail), before signing.
    const unvouched = events.find((event) => event.kind === 'audit-tail-unvouched');
    expect(unvouched).toMatchObject({
      source: 'runtime',
      outcome: 'error',
      data: { fromRow: checkpointRow + 1, toRow: killedHead, checkpointRow },
    });
    expect(unvouched?.message).toContain(
      `Rows ${checkpointRow + 1} to ${killedHead} were written after the last checkpoint`,
    );

    const { code, output } = await auditVerify(dataDir);
    expect(output).toMatch(
      new RegExp(
        `^audit chain broken at row ${checkpointRow + 1}: rows ${checkpointRow + 1} to ${killedHead} are not vouched for`,
        'm',
      ),
    );
    expect(code).toBe(1);
  }, 240_000);

  it('the checkpointed row itself rewritten: the start refuses to sign at all, names the row, and audit:verify fails there', async () => {
    const folder = pristine;
    tamperWith(folder, (database) => editAndRecompute(database, checkpointRow));
    const before = await readFile(join(folder, auditCheckpointsFileName), 'utf8');

    const events = await restart(folder);

    // Not one checkpoint more: neither at start, nor every N rows, nor at the orderly close.
    expect(await readFile(join(folder, auditCheckpointsFileName), 'utf8')).toBe(before);
    const refused = events.find((event) => event.kind === 'audit-checkpoint-refused');
    expect(refused).toMatchObject({ source: 'runtime', outcome: 'error', data: { rowId: checkpointRow } });
    expect(refused?.message).toContain(
      `row ${checkpointRow}'s hash is not the one the household admin signed for it: the chain up to row ${checkpointRow} was rewritten`,
    );

    const { code, output } = await auditVerify(folder);
    expect(output).toMatch(
      new RegExp(
        `^audit chain broken at row ${checkpointRow}: row ${checkpointRow}'s hash is not the one the household admin signed`,
        'm',
      ),
    );
    expect(code).toBe(1);
  }, 240_000);
});
