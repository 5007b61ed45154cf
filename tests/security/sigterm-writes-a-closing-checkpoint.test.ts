import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { auditCheckpointsFileName } from '../../lib/audit/audit-checkpoints';
import { auditVerify, checkpointLines } from './fixtures/audit-verify';

// Issue 26, defect 8: `docker stop` or a supervisor sends SIGTERM, and `next start` exited at once,
// so the rows since the last checkpoint were left unsigned (for anyone holding the disk to rewrite).
// A real process starts the household the way `next start` does (its own SIGTERM handler first,
// then instrumentation's register()); SIGTERM must leave a closing checkpoint at the table's head,
// and the process must still exit the way Next exits (143).
const root = fileURLToPath(new URL('../..', import.meta.url));
const folders: string[] = [];
afterAll(async () => {
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

/** Starts the app-like process on `dataDir`; resolves once it printed `started`, with how to await its exit. */
function startApp(dataDir: string): Promise<{ terminate(): Promise<number | null>; output(): string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'tests/security/fixtures/next-start-like.ts'], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      NEXT_RUNTIME: 'nodejs',
      EXTENSIBLE_MCP_DATA: dataDir,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (/^started$/m.test(text)) {
        resolve({
          terminate: () => {
            child.kill('SIGTERM');
            return exited;
          },
          output: () => text,
        });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then((code) => reject(new Error(`the app exited (${code}) before it started:\n${text}`)));
  });
}

function tableHead(dataDir: string): number {
  const database = new Database(join(dataDir, 'household.sqlite'), { readonly: true });
  try {
    return (database.prepare('SELECT COALESCE(MAX(id), 0) AS id FROM audit_log').get() as { id: number }).id;
  } finally {
    database.close();
  }
}

describe('SIGTERM to the app process', () => {
  it('writes a closing checkpoint over the last row before the process exits', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'sigterm-checkpoint-'));
    folders.push(dataDir);
    const app = await startApp(dataDir);
    const code = await app.terminate();
    // Next's own handler still runs, after the household closed.
    expect(code, app.output()).toBe(143);

    const head = tableHead(dataDir);
    const lines = await checkpointLines(join(dataDir, auditCheckpointsFileName));
    // The start's checkpoint, then the closing one: rows after the first were written while running.
    expect(lines.length, app.output()).toBeGreaterThanOrEqual(2);
    expect(head).toBeGreaterThan(lines[0]?.rowId ?? 0);
    expect(lines.at(-1)?.rowId).toBe(head);

    const verified = await auditVerify(dataDir);
    expect(verified.output).toMatch(
      new RegExp(`^audit chain verified: ${head} rows, checkpoint at row ${head} signed by `, 'm'),
    );
    expect(verified.output).not.toMatch(/await the next checkpoint/);
    expect(verified.code).toBe(0);
  }, 180_000);
});
