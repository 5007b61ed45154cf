/**
 * `npm run audit:verify` on a household that runs on PostgreSQL (SPEC §8, §11; issue 28): with
 * `DATABASE_URL` it re-walks the chain in the database's `audit_log` table against the checkpoints
 * in `audit_checkpoints`, as an operator runs it. A row edited by SQL is named; an empty database is
 * refused and left empty.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestHousehold, type TestHousehold } from '../payments/household';
import { auditVerify } from '../security/fixtures/audit-verify';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';

let household: TestHousehold | undefined;
const folders: string[] = [];
afterEach(async () => {
  await household?.close();
  household = undefined;
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** Runs SQL on the database as its owner would. */
async function sql(url: string, text: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query(text);
  } finally {
    await client.end();
  }
}

it.skipIf(postgresAvailable)(`audit:verify on PostgreSQL is skipped: ${postgresUnavailable}`, () => {});

describe.skipIf(!postgresAvailable)('npm run audit:verify with DATABASE_URL', () => {
  it("verifies the database's chain against its checkpoints, and names a row edited by SQL", async () => {
    const url = await createTestDatabase();
    // The data folder keeps the sealing key, which is never in the database.
    const dataDir = mkdtempSync(join(tmpdir(), 'audit-verify-postgres-'));
    folders.push(dataDir);
    household = await startTestHousehold({ dataDir, env: { DATABASE_URL: url }, enrol: false });
    await household.close();
    household = undefined;
    const rows = Number((await sql(url, 'SELECT COUNT(*) AS n FROM audit_log')).rows[0]?.n);
    expect(rows).toBeGreaterThan(2);

    const verified = await auditVerify(dataDir, { env: { DATABASE_URL: url } });
    expect(verified.output).toMatch(
      new RegExp(`audit chain verified: ${rows} rows, checkpoint at row ${rows} signed by`),
    );
    expect(verified.code).toBe(0);

    // A tamperer with the database: the append-only triggers off, one row's message rewritten in place.
    await sql(url, 'ALTER TABLE audit_log DISABLE TRIGGER USER');
    await sql(
      url,
      `UPDATE audit_log SET event = replace(event, event::json ->> 'message', 'nothing happened') WHERE id = 2`,
    );
    expect((await sql(url, "SELECT 1 FROM audit_log WHERE id = 2 AND event LIKE '%nothing happened%'")).rowCount).toBe(
      1,
    );
    const broken = await auditVerify(dataDir, { env: { DATABASE_URL: url } });
    expect(broken.output).toMatch(/audit chain broken at row 2: /);
    expect(broken.code).toBe(1);
  }, 120_000);

  it('refuses a database without a household, and creates nothing in it', async () => {
    const url = await createTestDatabase();
    const refused = await auditVerify('/nonexistent-household-folder', { env: { DATABASE_URL: url } });
    expect(refused.output).toMatch(/no household in the PostgreSQL database test_\w+ on .*: nothing to verify/);
    expect(refused.output).not.toContain(url);
    expect(refused.code).toBe(1);
    expect((await sql(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).rowCount).toBe(0);
  }, 60_000);
});
