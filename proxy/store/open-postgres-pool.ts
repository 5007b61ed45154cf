import pg from 'pg';
import { ProxyError } from '../errors';
import type { Migration } from './apply-migrations';
import { applyPostgresMigrations } from './apply-postgres-migrations';

/** Options of {@link openPostgresPool}. */
export interface PostgresPoolOptions {
  /** `postgres://…` or `postgresql://…` (a unix socket folder as `?host=/folder`). */
  readonly url: string;
  /** The modules' migrations, applied under the migration lock before the pool is returned. */
  readonly migrations: Readonly<Record<string, readonly Migration[]>>;
  /** Names the store in the error a failure throws. */
  readonly what: string;
  /** Connections at most (default 10). */
  readonly max?: number;
}

/**
 * Opens a connection pool on a PostgreSQL database the proxy's stores share (SPEC §11), with
 * `migrations` applied. A connection that breaks while idle is dropped by the pool and logged by
 * no one here: the next query opens another, and a query on a dead database fails as itself.
 * Failure to connect or migrate throws `ProxyError('store-failed')` with the server's reason but
 * without the URL (it may hold a password), and ends the pool.
 */
export async function openPostgresPool(options: PostgresPoolOptions): Promise<pg.Pool> {
  const pool = new pg.Pool({ connectionString: options.url, max: options.max ?? 10 });
  // Without a listener, an idle connection's error (a restarted server) would crash the process.
  pool.on('error', () => undefined);
  try {
    await applyPostgresMigrations(pool, options.migrations);
    return pool;
  } catch (error) {
    await pool.end().catch(() => undefined);
    // The server's message names what failed (no such database, authentication, the socket); it never holds the password.
    const reason = error instanceof Error ? error.message : String(error);
    throw new ProxyError('store-failed', `cannot open the ${options.what} on PostgreSQL: ${reason}`, { cause: error });
  }
}
