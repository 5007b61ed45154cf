/**
 * A database of its own for each test file, in the run's throwaway cluster
 * (`postgres-cluster.ts`). `postgresAvailable` tells `describe.skipIf` whether there is one; under
 * `CI=true` the cluster's setup has already failed the run when there is none.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

// Declared here, beside its one reader, so every type check that sees a PostgreSQL test sees it
// too (the app's, which covers the test files under proxy/ and lib/, included).
declare module 'vitest' {
  interface ProvidedContext {
    /** The throwaway cluster's admin URL, or why there is none (`postgres-cluster.ts` provides it). */
    postgres: { readonly url: string } | { readonly unavailable: string };
  }
}

const cluster = inject('postgres');

/** Whether this run has a PostgreSQL cluster; when not, why (shown in the skipped suite's name). */
export const postgresAvailable = 'url' in cluster;

/** Why PostgreSQL tests are skipped here, or `''`. */
export const postgresUnavailable = 'unavailable' in cluster ? cluster.unavailable : '';

/** The cluster's URL with another database name. */
function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** Creates an empty database and returns its URL (`postgres://…?host=SOCKET-FOLDER`). */
export async function createTestDatabase(): Promise<string> {
  if (!('url' in cluster)) throw new Error(`no PostgreSQL for this run: ${cluster.unavailable}`);
  const name = `test_${randomBytes(8).toString('hex')}`;
  const admin = new pg.Client({ connectionString: cluster.url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return withDatabase(cluster.url, name);
}
