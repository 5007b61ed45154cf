/**
 * A throwaway PostgreSQL cluster for one test run (vitest's globalSetup, `vitest.config.ts`):
 * `initdb` in a temporary folder, `pg_ctl start` listening on a unix socket in that folder only
 * (no TCP port, so parallel runs on one machine never collide), stopped and deleted after the run.
 * As root the server runs as the `postgres` user, since PostgreSQL refuses to run as root.
 *
 * Tests read the cluster's admin URL with `inject('postgres')` (see `postgres.ts`, which declares it). When the
 * binaries are missing or the server does not start, the run fails under `CI=true` (CI must never
 * skip the PostgreSQL tests) and otherwise provides `undefined`, which the tests report as a skip.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';

/** The folder holding `initdb` and `pg_ctl`: on the PATH, else where `pg_config` says (Debian's layout). */
function binaries(): string | undefined {
  const onPath = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' });
  if (onPath.status === 0 && onPath.stdout.trim() !== '') return undefined;
  const config = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  const folder = config.status === 0 ? config.stdout.trim() : '';
  if (folder === '' || !existsSync(join(folder, 'initdb')))
    throw new Error('initdb is neither on the PATH nor in pg_config --bindir');
  return folder;
}

/** Starts the cluster and provides its URL; returns the teardown that stops it. */
export default function setup(project: TestProject): () => void {
  const root = process.getuid?.() === 0;
  let folder: string | undefined;
  let pgCtl = 'pg_ctl';
  let data = '';
  // Runs a PostgreSQL binary as the user the server may run as.
  const run = (command: string, args: readonly string[]) =>
    root
      ? execFileSync('runuser', ['-u', 'postgres', '--', command, ...args], { stdio: 'pipe' })
      : execFileSync(command, args, { stdio: 'pipe' });
  try {
    const bin = binaries();
    const tool = (name: string) => (bin === undefined ? name : join(bin, name));
    pgCtl = tool('pg_ctl');
    folder = mkdtempSync(join(tmpdir(), 'emcp-postgres-'));
    // The server's user owns the folder (mode 0700, from mkdtemp): only it, and root, reach the socket.
    if (root) {
      const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
      chownSync(folder, id('-u'), id('-g'));
    }
    data = join(folder, 'data');
    run(tool('initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
    run(pgCtl, [
      'start',
      '-D',
      data,
      '-w',
      '-l',
      join(folder, 'server.log'),
      '-o',
      `-c listen_addresses='' -k ${folder} -p 5432 -c fsync=off -c max_connections=200`,
    ]);
    project.provide('postgres', { url: `postgres://postgres@localhost/postgres?host=${encodeURIComponent(folder)}` });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
    if (process.env.CI === 'true')
      throw new Error(`PostgreSQL did not start, and CI must not skip its tests: ${reason}`);
    project.provide('postgres', { unavailable: reason });
    return () => {};
  }
  const started = folder;
  return () => {
    try {
      run(pgCtl, ['stop', '-D', data, '-m', 'immediate', '-w']);
    } finally {
      rmSync(started, { recursive: true, force: true });
    }
  };
}
