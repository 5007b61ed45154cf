/**
 * One contract for every checkpoint store (SPEC §8, §11), the JSON-lines file and PostgreSQL: an
 * append-only list of what it was given, oldest first, damaged entries named in their place. The
 * shared part appends through two handles on one location at once.
 */
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { openPostgresPool } from '../../proxy/index';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../../tests/support/postgres';
import { type AuditCheckpoint, type CheckpointStore, createFileCheckpointStore } from './checkpoint-store';
import { createPostgresCheckpointStore, postgresCheckpointMigrations } from './postgres-checkpoint-store';

const closers: (() => Promise<void>)[] = [];
const folders: string[] = [];
afterEach(async () => {
  await Promise.allSettled(closers.splice(0).map((close) => close()));
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

const openPool = async (url: string) => {
  const pool = await openPostgresPool({
    url,
    migrations: { 'audit-checkpoints': postgresCheckpointMigrations },
    what: 'checkpoint store',
  });
  closers.push(() => pool.end());
  return pool;
};

/** Each implementation: a fresh location, an independent handle on it, and a way to store a damaged entry. */
const implementations: Record<
  string,
  {
    location(): Promise<string>;
    open(location: string): Promise<CheckpointStore>;
    damage(location: string): Promise<void>;
  }
> = {
  file: {
    location: async () => {
      const folder = mkdtempSync(join(tmpdir(), 'checkpoints-'));
      folders.push(folder);
      return join(folder, 'audit-checkpoints.jsonl');
    },
    open: async (path) => createFileCheckpointStore(path),
    damage: async (path) => appendFileSync(path, '{"rowId": 3, "hash\n'),
  },
  ...(postgresAvailable && {
    postgres: {
      location: createTestDatabase,
      open: async (url: string) => createPostgresCheckpointStore(await openPool(url)),
      damage: async (url: string) => {
        const pool = await openPool(url);
        await pool.query(`INSERT INTO audit_checkpoints (entry) VALUES ('{"rowId": 3, "hash')`);
      },
    },
  }),
};

it.skipIf(postgresAvailable)(`the PostgreSQL checkpoint store is skipped: ${postgresUnavailable}`, () => {});

const checkpoint = (rowId: number): AuditCheckpoint => ({
  rowId,
  hash: `${rowId}`.padStart(64, '0'),
  credential: `jwt-${rowId}`,
});

describe.each(Object.entries(implementations))('the %s checkpoint store', (_name, kind) => {
  describe('single instance', () => {
    it('is empty at first, then gives back what it was given, oldest first', async () => {
      const store = await kind.open(await kind.location());
      expect(await store.entries()).toEqual([]);
      expect(await store.newest()).toBeUndefined();
      for (const rowId of [1, 5, 2]) await store.append(checkpoint(rowId));
      expect(await store.entries()).toEqual([checkpoint(1), checkpoint(5), checkpoint(2)]);
      expect(await store.newest()).toEqual(checkpoint(2));
    });

    it('keeps its entries across a reopen, and names a damaged one in its place', async () => {
      const location = await kind.location();
      await (await kind.open(location)).append(checkpoint(1));
      await kind.damage(location);
      const reopened = await kind.open(location);
      expect(await reopened.entries()).toEqual([checkpoint(1), undefined]);
      expect(await reopened.newest()).toBeUndefined();
      await reopened.append(checkpoint(4));
      expect(await reopened.entries()).toEqual([checkpoint(1), undefined, checkpoint(4)]);
      expect(await reopened.newest()).toEqual(checkpoint(4));
    });
  });

  describe('shared: two handles on one location', () => {
    it('keeps every one of 40 concurrent appends through two handles, once, and both see one list', async () => {
      const location = await kind.location();
      const both = [await kind.open(location), await kind.open(location)];
      await Promise.all(Array.from({ length: 40 }, (_, index) => both[index % 2]?.append(checkpoint(index + 1))));
      const [first, second] = await Promise.all(both.map((store) => store.entries()));
      expect(first).toEqual(second);
      expect((first as AuditCheckpoint[]).map((entry) => entry.rowId).sort((a, b) => a - b)).toEqual(
        Array.from({ length: 40 }, (_, index) => index + 1),
      );
      expect(await both[1]?.newest()).toEqual(first?.at(-1));
    });
  });
});

describe.skipIf(!postgresAvailable)('the PostgreSQL checkpoints table', () => {
  it('refuses to change, delete or truncate what it holds', async () => {
    const url = await createTestDatabase();
    const store = createPostgresCheckpointStore(await openPool(url));
    await store.append(checkpoint(1));
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await expect(client.query(`UPDATE audit_checkpoints SET entry = '{}'`)).rejects.toThrow(/append-only: UPDATE/);
      await expect(client.query('DELETE FROM audit_checkpoints')).rejects.toThrow(/append-only: DELETE/);
      await expect(client.query('TRUNCATE audit_checkpoints')).rejects.toThrow(/append-only: TRUNCATE/);
      await expect(client.query(`INSERT INTO audit_checkpoints (id, entry) VALUES (99, '{}')`)).rejects.toThrow(
        /non-DEFAULT/,
      );
      // Not even the owner's override of the generated id can repeat one.
      await expect(
        client.query(`INSERT INTO audit_checkpoints (id, entry) OVERRIDING SYSTEM VALUE VALUES (1, '{}')`),
      ).rejects.toThrow(/duplicate key/);
    } finally {
      await client.end();
    }
    expect(await store.entries()).toEqual([checkpoint(1)]);
  });
});
