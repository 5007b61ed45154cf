import type pg from 'pg';
import type { Migration } from '../store/apply-migrations';
import { openPostgresPool } from '../store/open-postgres-pool';
import { type DiscoveryLimits, type DiscoveryStore, defaultDiscoveryLimits } from './discovery-store';

/**
 * The discovery tables on PostgreSQL (SPEC §3.5, §11), registered as module `discovery` like
 * SQLite's. Times are milliseconds since the epoch from the store's clock, so a test clock rules
 * both implementations alike. A name's `seq` orders it within its scope (newest highest), as
 * SQLite's rowid does. Append to change; never edit a shipped one.
 */
export const postgresDiscoveryStoreMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE discovery_scopes (
      scope TEXT PRIMARY KEY,
      expires_at BIGINT NOT NULL,
      searched_at BIGINT NOT NULL
    );
    CREATE INDEX discovery_scopes_by_expiry ON discovery_scopes (expires_at);
    CREATE INDEX discovery_scopes_by_search ON discovery_scopes (searched_at);
    CREATE SEQUENCE discovery_names_seq;
    CREATE TABLE discovery_names (
      scope TEXT NOT NULL REFERENCES discovery_scopes (scope) ON DELETE CASCADE,
      name TEXT NOT NULL,
      seq BIGINT NOT NULL DEFAULT nextval('discovery_names_seq'),
      PRIMARY KEY (scope, name)
    );
    CREATE INDEX discovery_names_by_seq ON discovery_names (scope, seq);`,
  },
  {
    // A search's writes in one statement (its own transaction), in the order the transaction of
    // version 1's code ran them: one round trip instead of seven. VOLATILE, so each step reads
    // with a snapshot of its own, as each statement of that transaction did.
    version: 2,
    sql: `CREATE FUNCTION discovery_remember(
        given_scope TEXT,
        given_names TEXT[],
        at_ms BIGINT,
        ttl_ms BIGINT,
        max_names BIGINT,
        max_scopes BIGINT
      ) RETURNS VOID LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      keeps_house BOOLEAN;
      created BOOLEAN;
    BEGIN
      -- One search at a time purges and evicts ("emcp-dhk", written out: a shipped migration
      -- never changes); the others skip it rather than wait.
      keeps_house := pg_try_advisory_xact_lock(7308607103741225067);
      -- Expired scopes go first, with their names (the cascade), so an expired scope found again
      -- starts empty: a later search never brings its old names back.
      IF keeps_house THEN
        DELETE FROM discovery_scopes WHERE expires_at <= at_ms;
      ELSE
        DELETE FROM discovery_scopes WHERE scope = given_scope AND expires_at <= at_ms;
      END IF;
      INSERT INTO discovery_scopes (scope, expires_at, searched_at) VALUES (given_scope, at_ms + ttl_ms, at_ms)
        ON CONFLICT (scope) DO UPDATE SET expires_at = excluded.expires_at, searched_at = excluded.searched_at
        RETURNING (xmax = 0) INTO created;
      -- Re-adding a name takes a new seq, so it becomes the scope's newest.
      INSERT INTO discovery_names (scope, name)
        SELECT given_scope, given.name FROM unnest(given_names) WITH ORDINALITY AS given (name, position)
          ORDER BY given.position
        ON CONFLICT (scope, name) DO UPDATE SET seq = nextval('discovery_names_seq');
      DELETE FROM discovery_names WHERE scope = given_scope AND seq IN (
        SELECT kept.seq FROM discovery_names kept WHERE kept.scope = given_scope ORDER BY kept.seq DESC OFFSET max_names);
      IF keeps_house AND created THEN
        DELETE FROM discovery_scopes WHERE scope IN (
          SELECT searched.scope FROM discovery_scopes searched
            ORDER BY searched.searched_at DESC, searched.scope OFFSET max_scopes);
      END IF;
    END
    $$;`,
  },
];

/** Scopes kept by default: a database, like a file, holds more than memory. */
const defaultPostgresScopes = 100_000;

/** Options of {@link openPostgresDiscoveryStore}. */
export interface PostgresDiscoveryStoreOptions extends DiscoveryLimits {
  /** `postgres://…`; several proxies on one database agree on every scope. */
  readonly url: string;
}

/**
 * Opens the discovery store on a PostgreSQL database (the CLI's `--store postgres://…`), with
 * {@link postgresDiscoveryStoreMigrations} applied under the migration lock. `close()` ends its
 * pool.
 */
export async function openPostgresDiscoveryStore(options: PostgresDiscoveryStoreOptions): Promise<DiscoveryStore> {
  const pool = await openPostgresPool({
    url: options.url,
    migrations: { discovery: postgresDiscoveryStoreMigrations },
    what: 'discovery store',
  });
  return { ...createPostgresDiscoveryStore(pool, options), close: () => pool.end() };
}

/**
 * The discovery store on a pool whose owner has applied {@link postgresDiscoveryStoreMigrations}.
 * A search's writes are one statement, `discovery_remember`, and so one transaction. Its upsert locks the scope's row, so searches of one
 * scope through any number of instances take turns and its names stay within the bound. Purging
 * expired scopes and evicting the least recently searched beyond the bound is done by one search
 * at a time (`pg_try_advisory_xact_lock`): the others skip it rather than wait, so two searches
 * never delete each other's rows in opposite orders (a deadlock), and the bound is kept by the
 * next search that gets the lock. `close()` leaves the pool to its owner.
 */
export function createPostgresDiscoveryStore(pool: pg.Pool, limits: DiscoveryLimits = {}): DiscoveryStore {
  const ttlMs = limits.ttlMs ?? defaultDiscoveryLimits.ttlMs;
  const maxNames = limits.maxNamesPerScope ?? defaultDiscoveryLimits.maxNamesPerScope;
  const maxScopes = limits.maxScopes ?? defaultPostgresScopes;
  const now = limits.now ?? Date.now;
  return {
    async remember(scope, names) {
      const at = now();
      // A name given twice counts where it was given last, as in memory.
      const ordered = [...new Set([...names].reverse())].reverse();
      await pool.query('SELECT discovery_remember($1, $2::text[], $3, $4, $5, $6)', [
        scope,
        ordered,
        at,
        ttlMs,
        maxNames,
        maxScopes,
      ]);
    },
    async has(scope, name) {
      const found = await pool.query(
        `SELECT 1 FROM discovery_scopes s JOIN discovery_names n ON n.scope = s.scope
         WHERE s.scope = $1 AND s.expires_at > $2 AND n.name = $3`,
        [scope, now(), name],
      );
      return found.rowCount === 1;
    },
    async live(scope) {
      const found = await pool.query('SELECT 1 FROM discovery_scopes WHERE scope = $1 AND expires_at > $2', [
        scope,
        now(),
      ]);
      return found.rowCount === 1;
    },
    async close() {
      // The pool is its owner's.
    },
  };
}
