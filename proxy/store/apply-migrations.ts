import Database from 'better-sqlite3';
import { ProxyError } from '../errors';

/** One schema step of a module: applied once, in version order, in its own transaction. */
export interface Migration {
  /** Positive integer, strictly increasing within a module's list. */
  readonly version: number;
  readonly sql: string;
}

/** One step a migration run applied: which module, at which version. */
export interface AppliedMigration {
  readonly module: string;
  readonly version: number;
}

/**
 * Brings each module's tables up to the newest version this code knows (SPEC §2: versioned
 * migrations per module). Every missing migration runs with its `schema_migrations` row in one
 * `BEGIN IMMEDIATE` transaction, so a failing step leaves nothing half-applied and two processes
 * opening the file at once cannot both apply it. A database whose recorded version for a module
 * is newer than the code knows is refused: older code must not write a schema it does not
 * understand. Returns the steps this run applied (none when another process had). Throws
 * `Error`; the opener wraps it.
 */
export function applyMigrations(
  database: Database.Database,
  migrations: Readonly<Record<string, readonly Migration[]>>,
): readonly AppliedMigration[] {
  const steps: AppliedMigration[] = [];
  database.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    module TEXT NOT NULL,
    version INTEGER NOT NULL,
    applied_at INTEGER NOT NULL,
    PRIMARY KEY (module, version)
  ) STRICT`);
  const newest = database.prepare<[string], { version: number | null }>(
    'SELECT MAX(version) AS version FROM schema_migrations WHERE module = ?',
  );
  const applied = database.prepare<[string, number], { one: number }>(
    'SELECT 1 AS one FROM schema_migrations WHERE module = ? AND version = ?',
  );
  const record = database.prepare<[string, number, number]>(
    'INSERT INTO schema_migrations (module, version, applied_at) VALUES (?, ?, ?)',
  );

  for (const [module, list] of Object.entries(migrations)) {
    // 1. The list itself must be well formed: a repeated or out-of-order version is a bug in the code, not the file.
    assertOrdered(module, list);
    const known = list.at(-1)?.version ?? 0;
    // 2. Refuse a file written by newer code, before touching anything of this module.
    refuseNewer(module, newest.get(module)?.version ?? 0, known);
    for (const migration of list) {
      database
        .transaction(() => {
          // 3. Re-checked under the write lock: another process may have applied it meanwhile.
          if (applied.get(module, migration.version) !== undefined) return;
          database.exec(migration.sql);
          record.run(module, migration.version, Date.now());
          steps.push({ module, version: migration.version });
        })
        .immediate();
    }
  }
  return steps;
}

/** Throws when a module's migrations are not strictly increasing positive integers (shared with PostgreSQL's runner). */
export function assertOrdered(module: string, list: readonly Migration[]): void {
  let previous = 0;
  for (const migration of list) {
    if (!Number.isSafeInteger(migration.version) || migration.version <= previous) {
      throw new Error(
        `migrations of module "${module}" must have strictly increasing positive integer versions (${migration.version} after ${previous})`,
      );
    }
    previous = migration.version;
  }
}

/** Throws when the database records a version of `module` newer than the code knows (shared with PostgreSQL's runner). */
export function refuseNewer(module: string, recorded: number, known: number): void {
  if (recorded > known) {
    throw new Error(
      `database schema of module "${module}" is at version ${recorded}, newer than this code knows (${known}): upgrade the software or use another data folder`,
    );
  }
}

/**
 * Opens a SQLite file the proxy owns (the CLI's `--store`, a standalone evidence file): WAL and a
 * busy timeout so several processes can share it, and `migrations` applied. The handle is closed
 * again if anything fails, and the error is thrown as it came.
 */
export function openSqliteFile(
  path: string,
  migrations: Readonly<Record<string, readonly Migration[]>>,
): Database.Database {
  const database = new Database(path);
  try {
    database.pragma('journal_mode = WAL');
    database.pragma('busy_timeout = 5000');
    applyMigrations(database, migrations);
    return database;
  } catch (error) {
    database.close();
    throw error;
  }
}

/**
 * Opens `path` as a store ({@link openSqliteFile}), `what` naming it in the error a failure
 * throws, and builds the store with `create`; the store's `close()` closes the file.
 */
export function openStoreFile<T extends object>(
  path: string,
  migrations: Readonly<Record<string, readonly Migration[]>>,
  what: string,
  create: (database: Database.Database) => T,
): T & { close(): Promise<void> } {
  let opened: Database.Database;
  try {
    opened = openSqliteFile(path, migrations);
  } catch (error) {
    throw new ProxyError('store-failed', `cannot open the ${what} ${path}`, { cause: error });
  }
  return {
    ...create(opened),
    async close() {
      opened.close();
    },
  };
}

/**
 * Prepares a store's statements on a database its owner opened, or says which migrations are
 * missing: a table that is absent or outdated fails here, once, not at the first call.
 */
export function prepareStatements<T>(
  database: Database.Database,
  prepare: (database: Database.Database) => T,
  migrations: string,
): T {
  try {
    return prepare(database);
  } catch (error) {
    throw new ProxyError(
      'store-failed',
      `the tables are missing or outdated: apply ${migrations} to this database first`,
      { cause: error },
    );
  }
}
