/**
 * What a tamperer with the household's data folder does to the audit table: open the SQLite file
 * directly, drop the append-only triggers, then edit, delete or reorder rows, or rewrite the chain
 * with every later hash recomputed (the algorithm is public). Each works on a copy of the folder.
 */
import { cpSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { canonicalJson, hashAuditRow } from '../../lib/audit/hash-audit-row';

/** Copies the data folder (database, key file, checkpoints) to a new temporary folder. */
export function copyDataFolder(dataDir: string): string {
  const copy = mkdtempSync(join(tmpdir(), 'audit-tampered-'));
  cpSync(dataDir, copy, { recursive: true, filter: (source) => !source.includes(`${join(dataDir, 'shop')}`) });
  return copy;
}

/** Opens the copied database as a tamperer does: directly, with the append-only triggers dropped. */
export function tamperWith(dataDir: string, change: (database: Database.Database) => void): void {
  const database = new Database(join(dataDir, 'household.sqlite'));
  try {
    for (const { name } of database
      .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'audit_log'")
      .all() as Array<{ name: string }>) {
      database.exec(`DROP TRIGGER ${name}`);
    }
    change(database);
  } finally {
    database.close();
  }
}

interface StoredRow {
  readonly id: number;
  readonly event: string;
  readonly prev_hash: string;
  readonly hash: string;
}

function row(database: Database.Database, id: number): StoredRow {
  const found = database.prepare('SELECT id, event, prev_hash, hash FROM audit_log WHERE id = ?').get(id);
  if (found === undefined) throw new Error(`no row ${id}`);
  return found as StoredRow;
}

/** Changes one row's event (its message), keeping the bytes canonical so only the hash can tell. */
export function editRow(database: Database.Database, id: number): void {
  const event = JSON.parse(row(database, id).event) as Record<string, unknown>;
  const edited = canonicalJson({ ...event, message: `${String(event.message)} (and nothing was refused)` });
  database.prepare('UPDATE audit_log SET event = ? WHERE id = ?').run(edited, id);
}

/** Deletes one row. */
export function deleteRow(database: Database.Database, id: number): void {
  database.prepare('DELETE FROM audit_log WHERE id = ?').run(id);
}

/** Swaps the ids of two rows: their order in the chain. */
export function swapRows(database: Database.Database, first: number, second: number): void {
  const parked = (database.prepare('SELECT MAX(id) AS id FROM audit_log').get() as { id: number }).id + 1000;
  database.transaction(() => {
    database.prepare('UPDATE audit_log SET id = ? WHERE id = ?').run(parked, first);
    database.prepare('UPDATE audit_log SET id = ? WHERE id = ?').run(first, second);
    database.prepare('UPDATE audit_log SET id = ? WHERE id = ?').run(second, parked);
  })();
}

/** Deletes the last `count` rows. */
export function deleteTail(database: Database.Database, count: number): void {
  database.prepare('DELETE FROM audit_log WHERE id > (SELECT MAX(id) FROM audit_log) - ?').run(count);
}

/** Edits one row and recomputes its hash and every later row's `prev_hash` and `hash`: a consistent forged chain. */
export function editAndRecompute(database: Database.Database, id: number): void {
  editRow(database, id);
  const rows = database.prepare('SELECT id, event FROM audit_log WHERE id >= ? ORDER BY id').all(id) as Array<{
    id: number;
    event: string;
  }>;
  let prevHash = row(database, id).prev_hash;
  const update = database.prepare('UPDATE audit_log SET prev_hash = ?, hash = ? WHERE id = ?');
  database.transaction(() => {
    for (const current of rows) {
      const hash = hashAuditRow({ id: current.id, prevHash, event: JSON.parse(current.event) });
      update.run(prevHash, hash, current.id);
      prevHash = hash;
    }
  })();
}

/** Row count of the audit table. */
export function countRows(dataDir: string): number {
  const database = new Database(join(dataDir, 'household.sqlite'), { readonly: true });
  try {
    return (database.prepare('SELECT COUNT(*) AS n FROM audit_log').get() as { n: number }).n;
  } finally {
    database.close();
  }
}
