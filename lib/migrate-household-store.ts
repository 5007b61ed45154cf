import { IdentityError } from '../identity/index';
import { type AppliedMigration, applyPostgresMigrations, type Migration, openPostgresPool } from '../proxy/index';
import { applyMigrations } from './apply-migrations';
import { postgresHouseholdMigrations } from './postgres-household-store';
import { type HouseholdStoreLocation, openHouseholdFile, sqliteHouseholdMigrations } from './store';

/** What one module's migration run did. */
export interface ModuleMigration {
  readonly module: string;
  /** Versions this run applied, in order; empty when the store was up to date. */
  readonly applied: readonly number[];
  /** The newest version this code knows, which the store is at now. */
  readonly version: number;
}

/** The outcome of {@link migrateHouseholdStore}, per module in the order they were migrated. */
export interface HouseholdMigration {
  readonly modules: readonly ModuleMigration[];
}

/**
 * Applies every module's missing migrations to the household's store and says what it applied
 * (`npm run household -- migrate`, issue 28), for operators who migrate before they roll out. The
 * same lists and runners as an app start, so a start afterwards applies nothing; on PostgreSQL the
 * run holds the migration lock, so it is safe beside starting instances. Faults throw `IdentityError('store-failed')`, never the URL.
 */
export async function migrateHouseholdStore(location: HouseholdStoreLocation): Promise<HouseholdMigration> {
  if (location.kind === 'sqlite') {
    const migrations = sqliteHouseholdMigrations;
    let steps: readonly AppliedMigration[];
    try {
      const database = openHouseholdFile(location.path);
      try {
        steps = applyMigrations(database, migrations);
      } finally {
        database.close();
      }
    } catch (error) {
      throw storeFailed(error);
    }
    return { modules: perModule(migrations, steps) };
  }
  const migrations = postgresHouseholdMigrations();
  let pool: Awaited<ReturnType<typeof openPostgresPool>>;
  try {
    // Connected and checked first; the steps are then applied here, so this run can count them.
    pool = await openPostgresPool({ url: location.url, migrations: {}, what: 'household store' });
  } catch (error) {
    throw storeFailed(error);
  }
  try {
    return { modules: perModule(migrations, await applyPostgresMigrations(pool, migrations)) };
  } catch (error) {
    throw storeFailed(error);
  } finally {
    await pool.end().catch(() => undefined);
  }
}

function perModule(
  migrations: Readonly<Record<string, readonly Migration[]>>,
  steps: readonly AppliedMigration[],
): ModuleMigration[] {
  return Object.entries(migrations).map(([module, list]) => ({
    module,
    applied: steps.filter((step) => step.module === module).map((step) => step.version),
    version: list.at(-1)?.version ?? 0,
  }));
}

/** The driver's or the server's reason (neither holds the URL), as identity's store error. */
function storeFailed(error: unknown): IdentityError {
  const reason = error instanceof Error ? error.message : String(error);
  return new IdentityError('store-failed', `cannot migrate the household store: ${reason}`, { cause: error });
}
