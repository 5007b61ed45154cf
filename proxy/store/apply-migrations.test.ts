import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { applyMigrations, type Migration } from './apply-migrations';

const open: Database.Database[] = [];
afterEach(() => {
  for (const database of open.splice(0)) database.close();
});

function memory(): Database.Database {
  const database = new Database(':memory:');
  open.push(database);
  return database;
}

function versions(database: Database.Database, module: string): number[] {
  return database
    .prepare<[string], { version: number }>('SELECT version FROM schema_migrations WHERE module = ? ORDER BY version')
    .all(module)
    .map((row) => row.version);
}

function tables(database: Database.Database): string[] {
  return database
    .prepare<[], { name: string }>(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'schema_migrations' ORDER BY name",
    )
    .all()
    .map((row) => row.name);
}

const one: Migration = { version: 1, sql: 'CREATE TABLE a (x INTEGER) STRICT' };
const two: Migration = { version: 2, sql: 'CREATE TABLE b (x INTEGER) STRICT' };
const three: Migration = { version: 3, sql: 'ALTER TABLE a ADD COLUMN y TEXT' };

describe('applyMigrations', () => {
  it('applies every migration of every module to a fresh database and records each version', () => {
    const database = memory();
    applyMigrations(database, { first: [one, two], second: [{ version: 1, sql: 'CREATE TABLE c (x TEXT) STRICT' }] });
    expect(versions(database, 'first')).toEqual([1, 2]);
    expect(versions(database, 'second')).toEqual([1]);
    expect(tables(database)).toEqual(['a', 'b', 'c']);
  });

  it('applies only the missing versions when the code knows more than the file', () => {
    const database = memory();
    applyMigrations(database, { first: [one] });
    database.prepare('INSERT INTO a (x) VALUES (7)').run();
    // Running version 1 again would fail ("table a already exists") and would lose the row.
    applyMigrations(database, { first: [one, two, three] });
    expect(versions(database, 'first')).toEqual([1, 2, 3]);
    expect(database.prepare('SELECT x, y FROM a').all()).toEqual([{ x: 7, y: null }]);
  });

  it('applies nothing on a second run', () => {
    const database = memory();
    applyMigrations(database, { first: [one, two] });
    const before = database.prepare('SELECT * FROM schema_migrations ORDER BY version').all();
    applyMigrations(database, { first: [one, two] });
    expect(database.prepare('SELECT * FROM schema_migrations ORDER BY version').all()).toEqual(before);
  });

  it('rolls a failing migration back whole and keeps the versions before it', () => {
    const database = memory();
    const broken: Migration = { version: 2, sql: 'CREATE TABLE b (x INTEGER) STRICT; INSERT INTO nowhere VALUES (1)' };
    expect(() => applyMigrations(database, { first: [one, broken] })).toThrow(/nowhere/);
    expect(versions(database, 'first')).toEqual([1]);
    // Table b was created by the failing step's first statement: the rollback removed it.
    expect(tables(database)).toEqual(['a']);
  });

  it('refuses a database at a version newer than the code knows, naming the module and both versions', () => {
    const database = memory();
    applyMigrations(database, { first: [one, two, three], second: [] });
    expect(() => applyMigrations(database, { first: [one, two], second: [] })).toThrow(
      'database schema of module "first" is at version 3, newer than this code knows (2)',
    );
  });

  it('refuses a recorded module whose list the code has emptied', () => {
    const database = memory();
    applyMigrations(database, { first: [one] });
    expect(() => applyMigrations(database, { first: [] })).toThrow(
      'database schema of module "first" is at version 1, newer than this code knows (0)',
    );
  });

  it('refuses a migration list whose versions are not strictly increasing', () => {
    const database = memory();
    expect(() => applyMigrations(database, { first: [two, one] })).toThrow(/module "first".*strictly increasing/);
    expect(() => applyMigrations(database, { first: [one, one] })).toThrow(/strictly increasing/);
    expect(() => applyMigrations(database, { first: [{ version: 0, sql: 'SELECT 1' }] })).toThrow(
      /strictly increasing/,
    );
    expect(tables(database)).toEqual([]);
  });
});
