import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';

describe.skipIf(!postgresAvailable)(`the test run's PostgreSQL cluster ${postgresUnavailable}`, () => {
  it('gives each call a database of its own, empty and writable', async () => {
    const [first, second] = await Promise.all([createTestDatabase(), createTestDatabase()]);
    expect(first).not.toBe(second);
    const client = new pg.Client({ connectionString: first });
    await client.connect();
    try {
      await client.query('CREATE TABLE marker (id INTEGER PRIMARY KEY)');
      await client.query('INSERT INTO marker (id) VALUES (1)');
      const version = await client.query<{ server_version_num: string }>('SHOW server_version_num');
      expect(Number(version.rows[0]?.server_version_num)).toBeGreaterThanOrEqual(150_000);
    } finally {
      await client.end();
    }
    const other = new pg.Client({ connectionString: second });
    await other.connect();
    try {
      const tables = await other.query("SELECT 1 FROM pg_tables WHERE tablename = 'marker'");
      expect(tables.rowCount).toBe(0);
    } finally {
      await other.end();
    }
  });
});
