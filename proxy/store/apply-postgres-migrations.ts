import type pg from 'pg';
import { type AppliedMigration, assertOrdered, type Migration, refuseNewer } from './apply-migrations';

/**
 * The advisory lock key every instance takes to migrate (a constant, so all code versions agree):
 * the ASCII of "emcp-mig" read as a signed 64-bit integer.
 */
export const migrationLockKey = '7308607103741815143';

/**
 * PostgreSQL's twin of `applyMigrations` (SPEC §11: versioned migrations): brings each module's
 * tables up to the newest version this code knows. The whole run holds the session-level
 * `pg_advisory_lock(migrationLockKey)` on one connection, so two instances starting at once on
 * an empty database take turns instead of racing on `CREATE TABLE`; the second finds every step
 * recorded and does nothing. Each missing step runs with its `schema_migrations` row in one
 * transaction (PostgreSQL's DDL is transactional), so a failing step leaves nothing half-applied.
 * A database whose recorded version of a module is newer than the code knows is refused. Returns
 * the steps this run applied (none when another instance had). Throws `Error`; the opener wraps it.
 */
export async function applyPostgresMigrations(
  pool: pg.Pool,
  migrations: Readonly<Record<string, readonly Migration[]>>,
): Promise<readonly AppliedMigration[]> {
  const steps: AppliedMigration[] = [];
  // 1. Every list well formed before anything touches the database.
  for (const [module, list] of Object.entries(migrations)) assertOrdered(module, list);
  const client = await pool.connect();
  let broken: unknown;
  try {
    // 2. One migrator at a time, across every instance on this database. If this connection
    //    dies, the server releases the lock with it.
    await client.query('SELECT pg_advisory_lock($1::bigint)', [migrationLockKey]);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        module TEXT NOT NULL,
        version INTEGER NOT NULL,
        applied_at BIGINT NOT NULL,
        PRIMARY KEY (module, version)
      )`);
      for (const [module, list] of Object.entries(migrations)) {
        const recorded = await client.query<{ version: number | null }>(
          'SELECT MAX(version) AS version FROM schema_migrations WHERE module = $1',
          [module],
        );
        const newest = recorded.rows[0]?.version ?? 0;
        // 3. Refuse a database written by newer code, before touching anything of this module.
        refuseNewer(module, newest, list.at(-1)?.version ?? 0);
        for (const migration of list) {
          if (migration.version <= newest) continue;
          await inTransaction(client, async () => {
            await client.query(migration.sql);
            await client.query('INSERT INTO schema_migrations (module, version, applied_at) VALUES ($1, $2, $3)', [
              module,
              migration.version,
              Date.now(),
            ]);
          });
          steps.push({ module, version: migration.version });
        }
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1::bigint)', [migrationLockKey]);
    }
    return steps;
  } catch (error) {
    broken = error;
    throw error;
  } finally {
    // A connection that failed mid-run may hold a broken transaction: discard it, never reuse it.
    client.release(broken instanceof Error ? broken : undefined);
  }
}

/**
 * Runs `work` between `BEGIN` and `COMMIT` on `client`, rolling back and rethrowing if it throws.
 * The client must be checked out of its pool for the whole transaction.
 */
export async function inTransaction<T>(client: pg.PoolClient, work: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    const result = await work();
    await client.query('COMMIT');
    return result;
  } catch (error) {
    // The step's own error is the one worth seeing; a rollback on a dead connection adds nothing.
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
