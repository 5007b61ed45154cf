import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../../tests/support/postgres';
import type { Migration } from './apply-migrations';
import { applyPostgresMigrations } from './apply-postgres-migrations';

const pools: pg.Pool[] = [];
afterEach(async () => {
  await Promise.allSettled(pools.splice(0).map((pool) => pool.end()));
});

async function database(): Promise<string> {
  return createTestDatabase();
}

function pool(url: string): pg.Pool {
  const opened = new pg.Pool({ connectionString: url, max: 2 });
  pools.push(opened);
  return opened;
}

async function versions(on: pg.Pool, module: string): Promise<number[]> {
  const result = await on.query<{ version: number }>(
    'SELECT version FROM schema_migrations WHERE module = $1 ORDER BY version',
    [module],
  );
  return result.rows.map((row) => row.version);
}

async function tables(on: pg.Pool): Promise<string[]> {
  const result = await on.query<{ tablename: string }>(
    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations' ORDER BY tablename",
  );
  return result.rows.map((row) => row.tablename);
}

// Plain CREATE TABLE (no IF NOT EXISTS) and an INSERT: applied twice, either fails or shows.
const one: Migration = { version: 1, sql: 'CREATE TABLE a (x INTEGER PRIMARY KEY); INSERT INTO a (x) VALUES (1)' };
const two: Migration = { version: 2, sql: 'CREATE TABLE b (x INTEGER)' };

describe.skipIf(!postgresAvailable)(`applyPostgresMigrations ${postgresUnavailable}`, () => {
  it('applies every module in version order, records each version, and does nothing the second time', async () => {
    const on = pool(await database());
    await applyPostgresMigrations(on, { first: [one, two], second: [{ version: 1, sql: 'CREATE TABLE c (x TEXT)' }] });
    await applyPostgresMigrations(on, { first: [one, two], second: [{ version: 1, sql: 'CREATE TABLE c (x TEXT)' }] });
    expect(await versions(on, 'first')).toEqual([1, 2]);
    expect(await versions(on, 'second')).toEqual([1]);
    expect(await tables(on)).toEqual(['a', 'b', 'c']);
    expect((await on.query('SELECT x FROM a')).rowCount).toBe(1);
  });

  it('applies only the new steps to a database at an older version', async () => {
    const on = pool(await database());
    await applyPostgresMigrations(on, { first: [one] });
    await applyPostgresMigrations(on, { first: [one, two] });
    expect(await versions(on, 'first')).toEqual([1, 2]);
    expect((await on.query('SELECT x FROM a')).rowCount).toBe(1);
  });

  it('leaves nothing of a failing step behind, and keeps the steps before it', async () => {
    const on = pool(await database());
    const failing: Migration = { version: 2, sql: 'CREATE TABLE b (x INTEGER); SELECT * FROM no_such_table' };
    await expect(applyPostgresMigrations(on, { first: [one, failing] })).rejects.toThrow(/no_such_table/);
    expect(await versions(on, 'first')).toEqual([1]);
    expect(await tables(on)).toEqual(['a']);
  });

  it('keeps a step and its record together: a step whose record cannot be written leaves nothing', async () => {
    const on = pool(await database());
    // The step itself succeeds; the trigger it makes refuses its own record (as a connection lost
    // between the two would leave it unrecorded), so the step must go with the record.
    const unrecordable: Migration = {
      version: 2,
      sql: `CREATE TABLE b (x INTEGER);
        CREATE FUNCTION refuse_record() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'record refused'; END $$;
        CREATE TRIGGER refuse_record BEFORE INSERT ON schema_migrations
          FOR EACH ROW EXECUTE FUNCTION refuse_record();`,
    };
    await expect(applyPostgresMigrations(on, { first: [one, unrecordable] })).rejects.toThrow(/record refused/);
    expect(await versions(on, 'first')).toEqual([1]);
    expect(await tables(on)).toEqual(['a']);
    // Nothing of it is left in the way: the real step 2 applies.
    await applyPostgresMigrations(on, { first: [one, two] });
    expect(await versions(on, 'first')).toEqual([1, 2]);
  });

  it('records a module and version once', async () => {
    const on = pool(await database());
    await applyPostgresMigrations(on, { first: [one] });
    await expect(
      on.query("INSERT INTO schema_migrations (module, version, applied_at) VALUES ('first', 1, 0)"),
    ).rejects.toThrow(/schema_migrations_pkey/);
  });

  it('refuses a database written by newer code, changing nothing', async () => {
    const on = pool(await database());
    await applyPostgresMigrations(on, { first: [one, two] });
    await expect(applyPostgresMigrations(on, { first: [one] })).rejects.toThrow(
      /version 2, newer than this code knows \(1\)/,
    );
  });

  it('refuses a list out of order before connecting', async () => {
    const on = pool(await database());
    await expect(applyPostgresMigrations(on, { first: [two, one] })).rejects.toThrow(/strictly increasing/);
    expect((await on.query("SELECT 1 FROM pg_tables WHERE tablename = 'schema_migrations'")).rowCount).toBe(0);
  });

  it('lets ten instances starting at once on an empty database migrate it exactly once', async () => {
    const url = await database();
    const instances = Array.from({ length: 10 }, () => pool(url));
    const outcomes = await Promise.allSettled(
      instances.map((on) => applyPostgresMigrations(on, { first: [one, two] })),
    );
    expect(outcomes.map((outcome) => outcome.status)).toEqual(Array(10).fill('fulfilled'));
    const on = instances[0] as pg.Pool;
    expect(await versions(on, 'first')).toEqual([1, 2]);
    expect((await on.query('SELECT x FROM a')).rowCount).toBe(1);
  });
});
