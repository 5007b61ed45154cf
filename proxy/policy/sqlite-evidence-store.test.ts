import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { EvidenceStore } from './evidence-store';
import { createSqliteEvidenceStore, evidenceStoreMigrations, openSqliteEvidenceStore } from './sqlite-evidence-store';

const folders: string[] = [];
const stores: EvidenceStore[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function storePath(): string {
  const folder = mkdtempSync(join(tmpdir(), 'evidence-store-'));
  folders.push(folder);
  return join(folder, 'evidence.sqlite');
}

function open(path: string, leaseMs = 1_000): EvidenceStore {
  const store = openSqliteEvidenceStore({ path, capacity: 10, leaseMs });
  stores.push(store);
  return store;
}

async function reserved(store: EvidenceStore, ids: string[], now: number, fingerprint = 'f1'): Promise<string> {
  const result = await store.reserve(
    ids.map((id) => ({ id, expiresAt: now + 10_000 })),
    now,
    { fingerprint },
  );
  if (!result.ok) throw new Error(`reserve failed: ${result.reason}`);
  return result.reservation;
}

// The behaviour every evidence store shows is in evidence-store-contract.test.ts; this file keeps SQLite's own schema.
describe('SQLite evidence store: schema', () => {
  it('a file with the table as first shipped keeps its entries and gains the settlement states', async () => {
    const path = storePath();
    const legacy = new Database(path);
    legacy.exec(`CREATE TABLE spent_evidence (
      id TEXT PRIMARY KEY,
      expires_at INTEGER NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('reserved', 'spent')),
      reservation TEXT,
      lease_until INTEGER
    ) STRICT`);
    legacy.prepare(`INSERT INTO spent_evidence VALUES ('old-spent', 9000, 'spent', 'r-old', NULL)`).run();
    legacy.close();
    const store = open(path);
    expect(await store.reserve([{ id: 'old-spent', expiresAt: 9_000 }], 1_000)).toMatchObject({
      ok: false,
      held: [{ id: 'old-spent', state: 'spent', reservation: 'r-old' }],
    });
    const reservation = await reserved(store, ['new'], 1_000);
    await store.markInDoubt(reservation);
    expect(await store.lookup(['new'], 1_000)).toMatchObject([{ state: 'in-doubt' }]);
    await store.close();
    stores.splice(stores.indexOf(store), 1);
    // Reopening applies nothing twice.
    expect(await open(path).isSpent('old-spent', 1_000)).toBe(true);
  });

  it('is constructible on a handle whose owner applied the migrations, and refuses a handle without them', async () => {
    const database = new Database(':memory:');
    try {
      expect(() => createSqliteEvidenceStore(database, { capacity: 10 })).toThrow(/evidenceStoreMigrations/);
      for (const migration of evidenceStoreMigrations) database.exec(migration.sql);
      const store = createSqliteEvidenceStore(database, { capacity: 10 });
      const reservation = await reserved(store, ['on-handle'], 1_000);
      await store.commit(reservation, { result: 'r' });
      await store.close();
      // Closing the store leaves the owner's handle open.
      expect(database.open).toBe(true);
      expect(database.prepare('SELECT state, result FROM spent_evidence').all()).toEqual([
        { state: 'spent', result: 'r' },
      ]);
    } finally {
      database.close();
    }
  });

  it('migration versions are strictly increasing positive integers', () => {
    const versions = evidenceStoreMigrations.map((migration) => migration.version);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    expect(new Set(versions).size).toBe(versions.length);
    expect(versions.every((version) => Number.isSafeInteger(version) && version > 0)).toBe(true);
  });
});
