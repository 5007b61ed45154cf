/**
 * `npm run household -- move-to-postgres` (issue 28), run as the real command
 * (`lib/household-main.ts`): a household that ran on its SQLite file, with a paid order, moves into
 * an empty PostgreSQL database. Every table's rows arrive, the audit chain verifies there against
 * the moved checkpoints (`npm run audit:verify`), and the household opens on the database as the
 * same household. A database that is not empty is refused, and a move that fails leaves the
 * target as empty as it was. A move started while an instance migrates the target waits for the
 * migration lock, and then refuses the tables that instance made.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { readHouseholdEnv } from '../../lib/env';
import { moveHouseholdToPostgres } from '../../lib/move-household-to-postgres';
import { openIdentity } from '../../lib/start-identity';
import { householdStoreLocation, openHouseholdStore } from '../../lib/store';
import { migrationLockKey } from '../../proxy/index';
import { startTestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';
import { auditVerify } from '../security/fixtures/audit-verify';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function folder(): string {
  const made = mkdtempSync(join(tmpdir(), 'household-move-'));
  folders.push(made);
  return made;
}

/** The real command with the data folder and `DATABASE_URL`; its output and exit code. */
async function move(dataDir: string, url: string): Promise<{ output: string; code: number }> {
  try {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'lib/household-main.ts', 'move-to-postgres'], {
      cwd: root,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        EXTENSIBLE_MCP_DATA: dataDir,
        DATABASE_URL: url,
      },
    });
    return { output: stdout, code: 0 };
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; code?: number };
    return { output: `${failed.stdout ?? ''}${failed.stderr ?? ''}`, code: failed.code ?? -1 };
  }
}

/** Rows per table of the SQLite file (its own bookkeeping and the migrations left out). */
function sqliteCounts(path: string): Record<string, number> {
  const database = new Database(path, { readonly: true });
  try {
    const tables = database
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('sqlite_sequence', 'schema_migrations', 'identity_locks')",
      )
      .all() as { name: string }[];
    return Object.fromEntries(
      tables.map(({ name }) => [
        name,
        (database.prepare(`SELECT COUNT(*) AS n FROM "${name}"`).get() as { n: number }).n,
      ]),
    );
  } finally {
    database.close();
  }
}

async function postgresCounts(url: string, tables: readonly string[]): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const counts: Record<string, number> = {};
    for (const table of tables) {
      counts[table] = Number((await client.query(`SELECT COUNT(*) AS n FROM "${table}"`)).rows[0]?.n);
    }
    return counts;
  } finally {
    await client.end();
  }
}

async function publicTables(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).rowCount ?? -1;
  } finally {
    await client.end();
  }
}

it.skipIf(postgresAvailable)(`the move to PostgreSQL is skipped: ${postgresUnavailable}`, () => {});

describe.skipIf(!postgresAvailable)('npm run household -- move-to-postgres', () => {
  it('moves every row of a SQLite household into an empty database, where its chain verifies; a second move is refused', async () => {
    const dataDir = folder();
    const household = await startTestHousehold({ dataDir });
    const { runtime } = household;
    const adminDid = runtime.identity.household.adminDid;
    const { invoice, invoiceId } = (await household.invoice([{ sku: 'large-pepperoni', qty: 1 }])) as {
      invoice: string;
      invoiceId: string;
    };
    const approvalId = await household.approve(invoice);
    const charged = await household.call(
      'payments__charge_invoice',
      { invoiceId, amountCents: 1500, merchantId: runtime.merchant?.did, approvalId },
      'pay charge invoice payment',
    );
    expect(charged.json, textOf(charged.result)).toMatchObject({ status: 'succeeded' });
    // The parent named both members and set the household's zone (issue 29): they move too.
    const profile = runtime.identity.store.identity.profile;
    await profile.setName({ role: 'parent', name: 'Alex', setAt: 1_750_000_000_000 });
    await profile.setName({ role: 'child', name: 'Zoé', setAt: 1_750_000_000_001 });
    await profile.setTimeZone({ timeZone: 'Europe/Paris', setAt: 1_750_000_000_002 });
    await household.close();

    const before = sqliteCounts(join(dataDir, 'household.sqlite'));
    expect(before.member_names).toBe(2);
    expect(before.household_settings).toBe(1);
    expect(before.audit_log).toBeGreaterThan(5);
    expect(before.payments).toBe(1);
    expect(before.passkeys).toBe(2);
    const url = await createTestDatabase();
    const moved = await move(dataDir, url);
    expect(moved.output).toMatch(
      /^Moved the household from the SQLite file .* to the PostgreSQL database test_\w+ on /,
    );
    expect(moved.output).toContain(`  audit_log: ${before.audit_log} rows`);
    expect(moved.output).not.toContain(url);
    expect(moved.code).toBe(0);
    // Every table's rows, and the file left as it was.
    expect(await postgresCounts(url, Object.keys(before))).toStrictEqual(before);
    expect(sqliteCounts(join(dataDir, 'household.sqlite'))).toStrictEqual(before);

    // The chain verifies in the database, against the checkpoints that came with it.
    const verified = await auditVerify(dataDir, { env: { DATABASE_URL: url } });
    expect(verified.output).toMatch(new RegExp(`audit chain verified: ${before.audit_log} rows, checkpoint at row`));
    expect(verified.code).toBe(0);

    // The same household opens on the database.
    const env = readHouseholdEnv({ EXTENSIBLE_MCP_DATA: dataDir, DATABASE_URL: url });
    const identity = await openIdentity(env, { store: await openHouseholdStore(householdStoreLocation(env)) });
    try {
      expect(identity.household.adminDid).toBe(adminDid);
      expect(await identity.store.identity.profile.names()).toStrictEqual([
        { role: 'child', name: 'Zoé', setAt: 1_750_000_000_001 },
        { role: 'parent', name: 'Alex', setAt: 1_750_000_000_000 },
      ]);
      expect(await identity.store.identity.profile.timeZone()).toStrictEqual({
        timeZone: 'Europe/Paris',
        setAt: 1_750_000_000_002,
      });
    } finally {
      identity.close();
    }

    // Not empty now: a second move is refused and changes nothing.
    const again = await move(dataDir, url);
    expect(again.output).toMatch(/The household was not moved: the target database is not empty/);
    expect(again.code).toBe(1);
    expect(await postgresCounts(url, Object.keys(before))).toStrictEqual(before);
  }, 180_000);

  it('waits while an instance migrates the target, then refuses the tables that instance made', async () => {
    const dataDir = folder();
    const sqlitePath = join(dataDir, 'household.sqlite');
    writeFileSync(sqlitePath, '');
    const url = await createTestDatabase();
    // An instance starting on the target: it holds the migration lock while it creates tables.
    const starting = new pg.Client({ connectionString: url });
    await starting.connect();
    try {
      await starting.query('SELECT pg_advisory_lock($1::bigint)', [migrationLockKey]);
      let settled = false;
      const settle = () => {
        settled = true;
      };
      const moving = moveHouseholdToPostgres({ sqlitePath, checkpointsPath: join(dataDir, 'none.jsonl'), url });
      // Handled at once: it is refused while the lock is given back, before the expectation below.
      void moving.then(settle, settle);
      const waiting = `SELECT 1 FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`;
      while (!settled && (await starting.query(waiting)).rowCount === 0);
      // The move waits for the lock before it looks at the target, so it cannot have moved yet.
      expect(settled).toBe(false);
      await starting.query('CREATE TABLE made_by_the_instance (x INTEGER)');
      await starting.query('SELECT pg_advisory_unlock($1::bigint)', [migrationLockKey]);
      await expect(moving).rejects.toThrow(/not empty \(1 table, such as made_by_the_instance\)/);
      expect(await publicTables(url)).toBe(1);
    } finally {
      await starting.end();
    }
  });

  it('leaves the target empty when the move fails part way: a table with no PostgreSQL twin', async () => {
    const source = folder();
    const seeded = await startTestHousehold({ dataDir: source, enrol: false });
    await seeded.close();
    const dataDir = folder();
    cpSync(source, dataDir, { recursive: true });
    const database = new Database(join(dataDir, 'household.sqlite'));
    database.exec("CREATE TABLE stray (x TEXT); INSERT INTO stray VALUES ('left behind')");
    database.close();
    const url = await createTestDatabase();
    const failed = await move(dataDir, url);
    expect(failed.output).toMatch(
      /The household was not moved: the target is unchanged: the SQLite table stray has no PostgreSQL twin/,
    );
    expect(failed.code).toBe(1);
    expect(await publicTables(url)).toBe(0);
  }, 120_000);
});
