/**
 * `npm run household -- migrate` (issue 28), run as the real command (`lib/household-main.ts`) on
 * a fresh store: it applies every module's migrations of the configured store, says per module
 * what it applied, and exits; a second run applies nothing. On SQLite (the data folder) and on
 * PostgreSQL (`DATABASE_URL`).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { postgresHouseholdMigrations } from '../../lib/postgres-household-store';
import { sqliteHouseholdMigrations } from '../../lib/store';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** The real command on `environment`; its lines and exit code. */
async function migrate(environment: Record<string, string>): Promise<{ lines: string[]; code: number }> {
  try {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'lib/household-main.ts', 'migrate'], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...environment },
    });
    return { lines: stdout.trimEnd().split('\n'), code: 0 };
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; code?: number };
    return { lines: `${failed.stdout ?? ''}${failed.stderr ?? ''}`.trimEnd().split('\n'), code: failed.code ?? -1 };
  }
}

/** What a first run must say: every module, each version it knows. */
function appliedLines(migrations: Readonly<Record<string, readonly { version: number }[]>>): string[] {
  return Object.entries(migrations).map(([module, list]) => {
    const versions = list.map((migration) => migration.version);
    const newest = versions.at(-1);
    return `  ${module}: applied version${versions.length === 1 ? '' : 's'} ${versions.join(', ')} (now at ${newest})`;
  });
}

function upToDateLines(migrations: Readonly<Record<string, readonly { version: number }[]>>): string[] {
  return Object.entries(migrations).map(
    ([module, list]) => `  ${module}: up to date at version ${list.at(-1)?.version}`,
  );
}

describe('npm run household -- migrate', () => {
  it('migrates a fresh SQLite data folder once, per module, and sets up no household', async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), 'household-migrate-')), 'data');
    folders.push(dataDir);
    const path = join(dataDir, 'household.sqlite');
    const first = await migrate({ EXTENSIBLE_MCP_DATA: dataDir });
    expect(first).toStrictEqual({
      code: 0,
      lines: [`Migrated the household store: SQLite file ${path}`, ...appliedLines(sqliteHouseholdMigrations)],
    });
    const database = new Database(path, { readonly: true });
    try {
      const recorded = database.prepare('SELECT COUNT(*) AS count FROM schema_migrations').get() as { count: number };
      const known = Object.values(sqliteHouseholdMigrations).reduce((sum, list) => sum + list.length, 0);
      expect(recorded.count).toBe(known);
      // Migrating is not starting: no household, no key file.
      expect(database.prepare('SELECT COUNT(*) AS count FROM identity_records').get()).toStrictEqual({ count: 0 });
    } finally {
      database.close();
    }
    expect(existsSync(join(dataDir, 'household.key'))).toBe(false);
    const second = await migrate({ EXTENSIBLE_MCP_DATA: dataDir });
    expect(second).toStrictEqual({
      code: 0,
      lines: [`Migrated the household store: SQLite file ${path}`, ...upToDateLines(sqliteHouseholdMigrations)],
    });
  });

  it('refuses a DATABASE_URL of another scheme without echoing it, and migrates nothing', async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), 'household-migrate-')), 'data');
    folders.push(dataDir);
    const refused = await migrate({ EXTENSIBLE_MCP_DATA: dataDir, DATABASE_URL: 'mysql://app:hunter2@db/household' });
    expect(refused.code).toBe(1);
    expect(refused.lines.join('\n')).toContain('DATABASE_URL');
    expect(refused.lines.join('\n')).not.toContain('hunter2');
    expect(existsSync(dataDir)).toBe(false);
  });

  it.skipIf(postgresAvailable)(`on PostgreSQL is skipped: ${postgresUnavailable}`, () => {});

  it.skipIf(!postgresAvailable)(
    'migrates a fresh PostgreSQL database once, per module, naming no user or password',
    async () => {
      const url = await createTestDatabase();
      const database = decodeURIComponent(new URL(url).pathname.slice(1));
      const socket = new URL(url).searchParams.get('host');
      const heading = `Migrated the household store: PostgreSQL database ${database} on ${socket}`;
      const migrations = postgresHouseholdMigrations();
      const dataDir = join(mkdtempSync(join(tmpdir(), 'household-migrate-')), 'data');
      folders.push(dataDir);
      const first = await migrate({ EXTENSIBLE_MCP_DATA: dataDir, DATABASE_URL: url });
      expect(first).toStrictEqual({ code: 0, lines: [heading, ...appliedLines(migrations)] });
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const recorded = await client.query<{ count: string }>('SELECT COUNT(*) AS count FROM schema_migrations');
        const known = Object.values(migrations).reduce((sum, list) => sum + list.length, 0);
        expect(Number(recorded.rows[0]?.count)).toBe(known);
        expect((await client.query('SELECT * FROM identity_records')).rowCount).toBe(0);
      } finally {
        await client.end();
      }
      // Nothing of the store went to the data folder.
      expect(existsSync(join(dataDir, 'household.sqlite'))).toBe(false);
      const second = await migrate({ EXTENSIBLE_MCP_DATA: dataDir, DATABASE_URL: url });
      expect(second).toStrictEqual({ code: 0, lines: [heading, ...upToDateLines(migrations)] });
    },
  );
});
