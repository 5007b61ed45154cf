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

describe('SQLite evidence store: settlement states', () => {
  it('a reservation lapses with its lease, an in-doubt one never does (not even past the evidence exp)', async () => {
    const store = open(storePath());
    await reserved(store, ['lapses'], 1_000);
    const inDoubt = await reserved(store, ['stays'], 1_000);
    await store.markInDoubt(inDoubt);
    // Far past the lease and past the evidence's own exp.
    const later = 1_000_000;
    expect((await store.reserve([{ id: 'lapses', expiresAt: later + 10_000 }], later)).ok).toBe(true);
    const again = await store.reserve([{ id: 'stays', expiresAt: later + 10_000 }], later);
    expect(again).toMatchObject({
      ok: false,
      reason: 'spent',
      held: [{ id: 'stays', state: 'in-doubt', fingerprint: 'f1' }],
    });
    expect(await store.isSpent('stays', later)).toBe(true);
  });

  it('a refused reserve reports every held id with its state, fingerprint and stored result, and holds nothing new', async () => {
    const store = open(storePath());
    const reservation = await reserved(store, ['a', 'b'], 1_000, 'first-call');
    await store.markInDoubt(reservation);
    await store.commit(reservation, { result: '{"content":[]}' });
    const refused = await store.reserve(
      [
        { id: 'fresh', expiresAt: 9_000 },
        { id: 'b', expiresAt: 9_000 },
      ],
      1_500,
      { fingerprint: 'second-call' },
    );
    expect(refused).toEqual({
      ok: false,
      reason: 'spent',
      id: 'b',
      held: [{ id: 'b', state: 'spent', reservation, fingerprint: 'first-call', result: '{"content":[]}' }],
    });
    expect(await store.lookup(['fresh', 'a'], 1_500)).toEqual([
      { id: 'a', state: 'spent', reservation, fingerprint: 'first-call', result: '{"content":[]}' },
    ]);
  });

  it('release frees an in-doubt reservation; commit and markInDoubt refuse a reservation no longer held', async () => {
    const store = open(storePath());
    const reservation = await reserved(store, ['x'], 1_000);
    await store.markInDoubt(reservation);
    await store.release(reservation);
    expect(await store.lookup(['x'], 1_000)).toEqual([]);
    await expect(store.commit(reservation)).rejects.toMatchObject({ code: 'store-failed' });
    await expect(store.markInDoubt(reservation)).rejects.toMatchObject({ code: 'store-failed' });
  });

  it('an id named twice in one call holds nothing', async () => {
    const store = open(storePath());
    const twice = await store.reserve(
      [
        { id: 'dup', expiresAt: 9_000 },
        { id: 'dup', expiresAt: 9_000 },
      ],
      1_000,
    );
    expect(twice).toEqual({ ok: false, reason: 'spent', id: 'dup', held: [] });
    expect(await store.lookup(['dup'], 1_000)).toEqual([]);
  });

  it('in doubt survives closing and reopening the file', async () => {
    const path = storePath();
    const first = open(path);
    await first.markInDoubt(await reserved(first, ['durable'], 1_000));
    await first.close();
    stores.splice(stores.indexOf(first), 1);
    expect(await open(path).lookup(['durable'], 1_000_000)).toMatchObject([{ state: 'in-doubt' }]);
  });
});

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
