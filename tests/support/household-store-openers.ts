/**
 * The household's store implementations the contract suites run over (issue 28): each gives a
 * fresh location and opens independent handles on it (a SQLite connection on one file, a `pg`
 * pool on one database), with identity's, the limits', the call approvals' and the allowances' stores. PostgreSQL is there only when
 * this run has a cluster (`postgres.ts`).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { AllowanceStore, CallApprovalStore, IdentityStore } from '../../identity/index';
import {
  createPostgresRequestLimitStore,
  postgresRequestLimitMigrations,
} from '../../lib/limits/postgres-request-limits';
import type { RequestLimitStore } from '../../lib/limits/request-limits';
import { createPostgresAllowanceStore, postgresAllowanceMigrations } from '../../lib/postgres-allowance-store';
import {
  createPostgresCallApprovalStore,
  postgresCallApprovalMigrations,
} from '../../lib/postgres-call-approval-store';
import { createPostgresIdentityStore, postgresIdentityMigrations } from '../../lib/postgres-identity-store';
import { openSqliteHouseholdStore } from '../../lib/store';
import { openPostgresPool } from '../../proxy/index';
import { createTestDatabase, postgresAvailable } from './postgres';

/** One handle on a store. */
export interface HouseholdStoreHandle {
  readonly identity: IdentityStore;
  readonly limits: RequestLimitStore;
  readonly callApprovals: CallApprovalStore;
  readonly allowances: AllowanceStore;
  close(): Promise<void>;
}

/** An implementation: a fresh location, and a way to open an independent handle on it. */
export interface HouseholdStoreOpener {
  location(): Promise<string>;
  open(location: string): Promise<HouseholdStoreHandle>;
  /** Everything stored at the location as text (the SQLite file and its WAL; every PostgreSQL table as JSON), to search for secrets. */
  dump(location: string): Promise<string>;
}

/** Opens handles and fresh locations, and closes and removes them all at `cleanUp()` (an `afterEach`). */
export function householdStoreOpeners(): {
  readonly implementations: Readonly<Record<string, HouseholdStoreOpener>>;
  cleanUp(): Promise<void>;
} {
  const opened: HouseholdStoreHandle[] = [];
  const folders: string[] = [];
  const tracked = (open: HouseholdStoreOpener['open']) => async (location: string) => {
    const handle = await open(location);
    opened.push(handle);
    return handle;
  };
  const sqlite: HouseholdStoreOpener = {
    location: async () => {
      const folder = mkdtempSync(join(tmpdir(), 'household-contract-'));
      folders.push(folder);
      return join(folder, 'household.sqlite');
    },
    dump: async (path) =>
      [path, `${path}-wal`]
        .filter((file) => existsSync(file))
        .map((file) => readFileSync(file).toString('latin1'))
        .join('\n'),
    open: tracked(async (path) => {
      const store = openSqliteHouseholdStore({ path });
      return {
        identity: store.identity,
        limits: store.limits,
        callApprovals: store.callApprovals,
        allowances: store.allowances,
        close: async () => store.close(),
      };
    }),
  };
  const postgres: HouseholdStoreOpener = {
    location: createTestDatabase,
    dump: async (url) => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const tables = await client.query<{ name: string }>(
          "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename",
        );
        const parts: string[] = [];
        for (const { name } of tables.rows) {
          const rows = await client.query(`SELECT coalesce(json_agg(t), '[]')::text AS rows FROM "${name}" t`);
          parts.push(`${name}: ${String(rows.rows[0]?.rows)}`);
        }
        return parts.join('\n');
      } finally {
        await client.end();
      }
    },
    open: tracked(async (url) => {
      const pool = await openPostgresPool({
        url,
        // After identity: the limits count pending requests from its `approvals` table.
        migrations: {
          identity: postgresIdentityMigrations,
          limits: postgresRequestLimitMigrations,
          'call-approvals': postgresCallApprovalMigrations,
          allowances: postgresAllowanceMigrations,
        },
        what: 'household store',
      });
      return {
        identity: createPostgresIdentityStore(pool),
        limits: createPostgresRequestLimitStore(pool),
        callApprovals: createPostgresCallApprovalStore(pool),
        allowances: createPostgresAllowanceStore(pool),
        close: () => pool.end(),
      };
    }),
  };
  return {
    implementations: { sqlite, ...(postgresAvailable && { postgres }) },
    async cleanUp() {
      await Promise.allSettled(opened.splice(0).map((handle) => handle.close()));
      for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
    },
  };
}
