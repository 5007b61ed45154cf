/**
 * A throwaway PostgreSQL cluster: `initdb` in a temporary folder, `pg_ctl start` listening on a
 * unix socket in that folder only (no TCP port, so parallel runs on one machine never collide),
 * stopped and deleted by `stop`. As root the server runs as the `postgres` user, since PostgreSQL
 * refuses to run as root. The test run's cluster (`postgres-cluster.ts`) and the bench use it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A running cluster: its admin URL, and the stop that deletes it. */
export interface ThrowawayPostgres {
  readonly url: string;
  stop(): void;
}

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

/**
 * Starts a cluster; throws when the binaries are missing or the server does not start (nothing is
 * left behind then). `durable: false` (the tests') turns `fsync` off; the bench keeps PostgreSQL's
 * defaults, so its figures include the commit's flush as a production server's would.
 */
export function startThrowawayPostgres(options: { readonly durable: boolean }): ThrowawayPostgres {
  const root = process.getuid?.() === 0;
  // Runs a PostgreSQL binary as the user the server may run as.
  const run = (command: string, args: readonly string[]) =>
    root
      ? execFileSync('runuser', ['-u', 'postgres', '--', command, ...args], { stdio: 'pipe' })
      : execFileSync(command, args, { stdio: 'pipe' });
  const bin = binaries();
  const tool = (name: string) => (bin === undefined ? name : join(bin, name));
  const pgCtl = tool('pg_ctl');
  const folder = mkdtempSync(join(tmpdir(), 'emcp-postgres-'));
  const data = join(folder, 'data');
  try {
    // The server's user owns the folder (mode 0700, from mkdtemp): only it, and root, reach the socket.
    if (root) {
      const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
      chownSync(folder, id('-u'), id('-g'));
    }
    run(tool('initdb'), [
      '-D',
      data,
      '-U',
      'postgres',
      '--auth=trust',
      ...(options.durable ? [] : ['--no-sync']),
      '-E',
      'UTF8',
      '--locale=C',
    ]);
    const settings = `-c listen_addresses='' -k ${folder} -p 5432 -c max_connections=200${options.durable ? '' : ' -c fsync=off'}`;
    run(pgCtl, ['start', '-D', data, '-w', '-l', join(folder, 'server.log'), '-o', settings]);
  } catch (error) {
    rmSync(folder, { recursive: true, force: true });
    throw error;
  }
  return {
    url: `postgres://postgres@localhost/postgres?host=${encodeURIComponent(folder)}`,
    stop() {
      try {
        run(pgCtl, ['stop', '-D', data, '-m', 'immediate', '-w']);
      } finally {
        rmSync(folder, { recursive: true, force: true });
      }
    },
  };
}
