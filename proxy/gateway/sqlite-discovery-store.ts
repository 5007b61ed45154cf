import type Database from 'better-sqlite3';
import { type Migration, openStoreFile, prepareStatements } from '../store/apply-migrations';
import { type DiscoveryLimits, type DiscoveryStore, defaultDiscoveryLimits } from './discovery-store';

/**
 * The discovery tables' migrations (SPEC §3.5, §11), oldest first, for a host that keeps them in
 * its own database (the household's one SQLite file registers them as `discovery`).
 * {@link openSqliteDiscoveryStore} applies them itself. Append to change; never edit a shipped one.
 */
export const discoveryStoreMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE discovery_scopes (
      scope TEXT PRIMARY KEY,
      expires_at INTEGER NOT NULL,
      searched_at INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX discovery_scopes_by_expiry ON discovery_scopes (expires_at);
    CREATE INDEX discovery_scopes_by_search ON discovery_scopes (searched_at);
    CREATE TABLE discovery_names (
      scope TEXT NOT NULL,
      name TEXT NOT NULL,
      PRIMARY KEY (scope, name)
    ) STRICT;`,
  },
];

/** Scopes a SQLite store keeps by default: a file is cheaper than memory, so more than in memory. */
const defaultSqliteScopes = 100_000;

/** Options of {@link openSqliteDiscoveryStore}. */
export interface SqliteDiscoveryStoreOptions extends DiscoveryLimits {
  /** The database file (created if missing); several processes may share it. */
  readonly path: string;
}

/**
 * Opens (creating or upgrading) a SQLite file as the discovery store (WAL, busy timeout,
 * {@link discoveryStoreMigrations} applied): the CLI's `--store sqlite:FILE`. Two proxies on one
 * file agree on every scope. `close()` closes the file.
 */
export function openSqliteDiscoveryStore(options: SqliteDiscoveryStoreOptions): DiscoveryStore {
  return openStoreFile(options.path, { discovery: discoveryStoreMigrations }, 'discovery store', (opened) =>
    createSqliteDiscoveryStore(opened, options),
  );
}

/**
 * The discovery store on an existing better-sqlite3 handle whose owner has applied
 * {@link discoveryStoreMigrations} (the household store). A search's writes run in one
 * `BEGIN IMMEDIATE` transaction: expired scopes are purged, the scope's time limit restarts, its
 * oldest names beyond the bound and the least recently searched scopes beyond the bound are
 * forgotten. `close()` leaves the handle to its owner.
 */
export function createSqliteDiscoveryStore(database: Database.Database, limits: DiscoveryLimits = {}): DiscoveryStore {
  const ttlMs = limits.ttlMs ?? defaultDiscoveryLimits.ttlMs;
  const maxNames = limits.maxNamesPerScope ?? defaultDiscoveryLimits.maxNamesPerScope;
  const maxScopes = limits.maxScopes ?? defaultSqliteScopes;
  const now = limits.now ?? Date.now;
  const statements = prepareStatements(database, prepare, 'discoveryStoreMigrations');
  const remember = database.transaction((scope: string, names: readonly string[], at: number) => {
    statements.purgeNames.run(at);
    statements.purgeScopes.run(at);
    const known = statements.live.get(scope, at) !== undefined;
    statements.upsertScope.run(scope, at + ttlMs, at);
    for (const name of names) {
      // Deleted and inserted again, so its rowid is the scope's newest: the trim forgets the oldest.
      statements.forgetName.run(scope, name);
      statements.addName.run(scope, name);
    }
    statements.trimNames.run(scope, maxNames);
    if (!known && (statements.countScopes.get()?.count ?? 0) > maxScopes) {
      statements.evictNames.run(maxScopes);
      statements.evictScopes.run(maxScopes);
    }
  });
  return {
    async remember(scope, names) {
      remember.immediate(scope, names, now());
    },
    async has(scope, name) {
      return statements.has.get(scope, now(), name) !== undefined;
    },
    async live(scope) {
      return statements.live.get(scope, now()) !== undefined;
    },
    async close() {
      // The handle is its owner's.
    },
  };
}

function prepare(database: Database.Database) {
  return {
    purgeNames: database.prepare<[number]>(
      'DELETE FROM discovery_names WHERE scope IN (SELECT scope FROM discovery_scopes WHERE expires_at <= ?)',
    ),
    purgeScopes: database.prepare<[number]>('DELETE FROM discovery_scopes WHERE expires_at <= ?'),
    upsertScope: database.prepare<[string, number, number]>(
      `INSERT INTO discovery_scopes (scope, expires_at, searched_at) VALUES (?, ?, ?)
       ON CONFLICT (scope) DO UPDATE SET expires_at = excluded.expires_at, searched_at = excluded.searched_at`,
    ),
    forgetName: database.prepare<[string, string]>('DELETE FROM discovery_names WHERE scope = ? AND name = ?'),
    addName: database.prepare<[string, string]>('INSERT INTO discovery_names (scope, name) VALUES (?, ?)'),
    trimNames: database.prepare<[string, number]>(
      `DELETE FROM discovery_names WHERE rowid IN (
         SELECT rowid FROM discovery_names WHERE scope = ? ORDER BY rowid DESC LIMIT -1 OFFSET ?)`,
    ),
    countScopes: database.prepare<[], { count: number }>('SELECT COUNT(*) AS count FROM discovery_scopes'),
    evictNames: database.prepare<[number]>(
      `DELETE FROM discovery_names WHERE scope IN (
         SELECT scope FROM discovery_scopes ORDER BY searched_at DESC LIMIT -1 OFFSET ?)`,
    ),
    evictScopes: database.prepare<[number]>(
      `DELETE FROM discovery_scopes WHERE scope IN (
         SELECT scope FROM discovery_scopes ORDER BY searched_at DESC LIMIT -1 OFFSET ?)`,
    ),
    live: database.prepare<[string, number]>('SELECT 1 FROM discovery_scopes WHERE scope = ? AND expires_at > ?'),
    has: database.prepare<[string, number, string]>(
      `SELECT 1 FROM discovery_scopes s JOIN discovery_names n ON n.scope = s.scope
       WHERE s.scope = ? AND s.expires_at > ? AND n.name = ?`,
    ),
  };
}
