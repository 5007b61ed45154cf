import { existsSync } from 'node:fs';
import type Database from 'better-sqlite3';
import pg from 'pg';
import { IdentityError } from '../identity/index';
import { migrationLockKey } from '../proxy/index';
import { applyMigrations } from './apply-migrations';
import { createFileCheckpointStore } from './audit/checkpoint-store';
import { postgresHouseholdMigrations } from './postgres-household-store';
import { openHouseholdFile, sqliteHouseholdMigrations } from './store';

/** What {@link moveHouseholdToPostgres} copies from, and to. */
export interface HouseholdMove {
  /** The household's SQLite file (it must exist). */
  readonly sqlitePath: string;
  /** The checkpoints file beside it; a missing file holds none. */
  readonly checkpointsPath: string;
  /** The empty PostgreSQL database; never printed (it may hold a password). */
  readonly url: string;
}

/** What was copied: rows per table, in the order copied, and the checkpoints. */
export interface HouseholdMoved {
  readonly tables: readonly { readonly table: string; readonly rows: number }[];
  readonly checkpoints: number;
}

/**
 * SQLite's own bookkeeping; the migrations table, which the target writes itself; and identity's
 * lock rows, SQLite's stand-in for the advisory locks PostgreSQL has (held only while one runs).
 */
const notCopied = new Set(['sqlite_sequence', 'schema_migrations', 'identity_locks']);

/**
 * Columns only the PostgreSQL twin has, as SQLite expressions over the source row: the evidence
 * store's `reservation_size` is how many ids its reservation took.
 */
const derived: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  spent_evidence: {
    reservation_size:
      'MAX(1, (SELECT COUNT(*) FROM spent_evidence AS others WHERE others.reservation = spent_evidence.reservation))',
  },
};

interface TargetColumn {
  readonly name: string;
  readonly type: string;
  readonly generated: boolean;
  readonly identity: boolean;
}

/**
 * Copies a household from its SQLite file into an empty PostgreSQL database (`npm run household --
 * move-to-postgres`, issue 28): every module's tables, made by the same PostgreSQL migrations an app
 * start applies (so a start afterwards applies nothing), then every row of every table, identity
 * values kept (the audit chain's ids, the allowance holds' sequences) and the identity sequences
 * moved past them, then the checkpoints file's entries into `audit_checkpoints`. It all happens in
 * one transaction under the migration lock: a target that is not empty is refused before anything
 * is written, and any failure (a table with no PostgreSQL twin, a row the target refuses) rolls
 * everything back, so the target stays as empty as it was. The SQLite file is brought to this
 * code's schema first, as a start would, and otherwise left as it is. The sealing key is not
 * copied: it stays in its file, and every instance on the database uses it. Faults throw
 * `IdentityError('store-failed')` without the URL.
 */
export async function moveHouseholdToPostgres(move: HouseholdMove): Promise<HouseholdMoved> {
  if (!existsSync(move.sqlitePath)) {
    throw new IdentityError('store-failed', `no household SQLite file at ${move.sqlitePath}: nothing to move`);
  }
  const migrations = postgresHouseholdMigrations();
  const source = openHouseholdFile(move.sqlitePath);
  const client = new pg.Client({ connectionString: move.url });
  try {
    applyMigrations(source, sqliteHouseholdMigrations);
    await client.connect();
    await client.query('BEGIN');
    try {
      // No instance migrates (or starts) while the move runs; the check for emptiness is under the lock.
      await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [migrationLockKey]);
      const existing = await client.query<{ name: string }>(
        "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename",
      );
      if (existing.rows.length > 0) {
        throw new IdentityError(
          'conflict',
          `the target database is not empty (${existing.rows.length} table${existing.rows.length === 1 ? '' : 's'}, such as ${existing.rows[0]?.name}): a household moves only into an empty database`,
        );
      }
      await createSchema(client, migrations);
      const tables = await copyTables(source, client);
      const checkpoints = await copyCheckpoints(move.checkpointsPath, client);
      await client.query('COMMIT');
      return { tables, checkpoints };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  } catch (error) {
    if (error instanceof IdentityError) throw error;
    const reason = error instanceof Error ? error.message : String(error);
    throw new IdentityError('store-failed', `the target is unchanged: ${reason}`, {
      cause: error,
    });
  } finally {
    source.close();
    await client.end().catch(() => undefined);
  }
}

/** Every module's PostgreSQL migrations, recorded in `schema_migrations` as the runner does. */
async function createSchema(
  client: pg.Client,
  migrations: ReturnType<typeof postgresHouseholdMigrations>,
): Promise<void> {
  await client.query(`CREATE TABLE schema_migrations (
    module TEXT NOT NULL,
    version INTEGER NOT NULL,
    applied_at BIGINT NOT NULL,
    PRIMARY KEY (module, version)
  )`);
  for (const [module, list] of Object.entries(migrations)) {
    for (const migration of list) {
      await client.query(migration.sql);
      await client.query('INSERT INTO schema_migrations (module, version, applied_at) VALUES ($1, $2, $3)', [
        module,
        migration.version,
        Date.now(),
      ]);
    }
  }
}

/** Every SQLite table's rows into its PostgreSQL twin, in insertion order. */
async function copyTables(source: Database.Database, client: pg.Client): Promise<HouseholdMoved['tables']> {
  const names = (
    source.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid").all() as { name: string }[]
  )
    .map((row) => row.name)
    .filter((name) => !notCopied.has(name));
  const copied: { table: string; rows: number }[] = [];
  // In the order the migrations made them: a table a foreign key names is copied before the table that names it.
  for (const table of names) {
    const target = await targetColumns(client, table);
    if (target.length === 0) throw new Error(`the SQLite table ${table} has no PostgreSQL twin`);
    const sourceColumns = (source.prepare(`PRAGMA table_info("${table}")`).all() as { name: string }[]).map(
      (column) => column.name,
    );
    const byName = new Map(target.map((column) => [column.name, column]));
    const missing = sourceColumns.filter((name) => byName.get(name) === undefined || byName.get(name)?.generated);
    if (missing.length > 0) throw new Error(`the PostgreSQL table ${table} has no column ${missing.join(', ')}`);
    const extra = Object.entries(derived[table] ?? {});
    const columns = [...sourceColumns, ...extra.map(([name]) => name)].map((name) => byName.get(name) as TargetColumn);
    const overriding = columns.some((column) => column.identity) ? ' OVERRIDING SYSTEM VALUE' : '';
    const list = columns.map((column) => `"${column.name}"`).join(', ');
    const values = columns.map((_, index) => `$${index + 1}`).join(', ');
    const insert = `INSERT INTO "${table}" (${list})${overriding} VALUES (${values})`;
    const selected = [
      ...sourceColumns.map((name) => `"${name}"`),
      ...extra.map(([name, expression]) => `${expression} AS "${name}"`),
    ].join(', ');
    let rows = 0;
    for (const row of source.prepare(`SELECT ${selected} FROM "${table}" ORDER BY rowid`).iterate() as Iterable<
      Record<string, unknown>
    >) {
      await client.query(
        insert,
        columns.map((column) => toTarget(row[column.name], column)),
      );
      rows += 1;
    }
    // An identity column continues after the copied values.
    for (const column of target.filter((each) => each.identity)) {
      await client.query(
        `SELECT setval(pg_get_serial_sequence($1, $2), GREATEST((SELECT MAX("${column.name}") FROM "${table}"), 1), (SELECT COUNT(*) > 0 FROM "${table}"))`,
        [table, column.name],
      );
    }
    copied.push({ table, rows });
  }
  return copied;
}

/** A PostgreSQL table's columns, which are generated and which are identity columns; none when it has no such table. */
async function targetColumns(client: pg.Client, table: string): Promise<TargetColumn[]> {
  const result = await client.query<{ name: string; type: string; generated: string; identity: string }>(
    `SELECT column_name AS name, data_type AS type, is_generated AS generated, is_identity AS identity
     FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position`,
    [table],
  );
  return result.rows.map((row) => ({
    name: row.name,
    type: row.type,
    generated: row.generated === 'ALWAYS',
    identity: row.identity === 'YES',
  }));
}

/** A SQLite value as the target column takes it: integers stay exact, 0/1 become booleans. */
function toTarget(value: unknown, column: TargetColumn): unknown {
  if (column.type === 'boolean' && typeof value === 'number') return value !== 0;
  if (typeof value === 'bigint') return value.toString();
  return value;
}

/** The checkpoints file's entries, as stored, into the shared table, oldest first. */
async function copyCheckpoints(path: string, client: pg.Client): Promise<number> {
  const entries = await createFileCheckpointStore(path).entries();
  for (const entry of entries) {
    if (entry === undefined) throw new Error('the checkpoints file has a line that is not JSON');
    await client.query('INSERT INTO audit_checkpoints (entry) VALUES ($1)', [JSON.stringify(entry)]);
  }
  return entries.length;
}
