import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../tests/support/postgres';
import { readHouseholdEnv } from './env';
import { postgresHouseholdMigrations } from './postgres-household-store';
import { openIdentity, startIdentity } from './start-identity';
import { type HouseholdStore, householdStoreLocation, openHouseholdStore } from './store';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function folder(): string {
  const path = mkdtempSync(join(tmpdir(), 'household-postgres-'));
  cleanups.push(() => rmSync(path, { recursive: true, force: true }));
  return path;
}

async function tables(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const rows = await client.query<{ name: string }>(
      "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename",
    );
    return rows.rows.map((row) => row.name);
  } finally {
    await client.end();
  }
}

it.skipIf(postgresAvailable)(`the PostgreSQL household store is skipped: ${postgresUnavailable}`, () => {});

describe.skipIf(!postgresAvailable)('the household store on PostgreSQL', () => {
  it("opens one pool with every module's migrations, and identity starts on it once for two instances", async () => {
    const url = await createTestDatabase();
    const env = readHouseholdEnv({ EXTENSIBLE_MCP_DATA: folder(), DATABASE_URL: url });
    const open = (): Promise<HouseholdStore> => openHouseholdStore(householdStoreLocation(env));
    const [first, second] = await Promise.all([
      startIdentity(env, { store: await open() }),
      startIdentity(env, { store: await open() }),
    ]);
    cleanups.push(
      () => first.close(),
      () => second.close(),
    );
    expect(first.store.location).toStrictEqual({ kind: 'postgres', url });
    expect(second.household.adminDid).toBe(first.household.adminDid);
    expect(second.household.members).toStrictEqual(first.household.members);
    // Each role's code was issued by exactly one of the two starts.
    expect([...first.codes, ...second.codes].map((issued) => issued.role).sort()).toStrictEqual(['child', 'parent']);
    const migrated = await tables(url);
    for (const table of [
      'identity_records',
      'approvals',
      'call_approvals',
      'payments',
      'spent_evidence',
      'chat_sessions',
      'audit_checkpoints',
      'audit_log',
      'turn_leases',
      'allowances',
      'allowance_holds',
      'schema_migrations',
    ]) {
      expect(migrated).toContain(table);
    }
    // The checkpoints are the shared table's, not a file in one instance's data folder.
    await first.store.checkpoints.append({ rowId: 1 } as never);
    expect(await second.store.checkpoints.entries()).toStrictEqual([{ rowId: 1 }]);
    // A reopen applies nothing and finds the same household.
    const again = await openIdentity(env, { store: await open() });
    cleanups.push(() => again.close());
    expect(again.household.adminDid).toBe(first.household.adminDid);
    // One chain for both instances: the events of both starts are in the shared table.
    expect((await first.store.audit.head()).rowId).toBe((await second.store.audit.head()).rowId);
    expect(Object.keys(postgresHouseholdMigrations())).toContain('audit');
  });
});
