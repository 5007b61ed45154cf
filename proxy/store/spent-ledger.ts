import type Database from 'better-sqlite3';
import { ProxyError } from '../errors';
import { type Migration, openSqliteFile, prepareStatements } from './apply-migrations';

/**
 * Single-use ids (SPEC §3.12): a request state is honoured once. `spend` answers true the first
 * time an id is spent and false ever after (until `expiresAt`, past which the id is refused by
 * its own expiry anyway and may be forgotten).
 */
export interface SpentLedger {
  spend(id: string, expiresAt: number): Promise<boolean>;
  close(): Promise<void>;
}

/** The ledger's table, for {@link openSqliteSpentLedger}. Append to change; never edit a shipped one. */
export const spentLedgerMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE spent_ids (
      id TEXT PRIMARY KEY,
      expires_at INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX spent_ids_by_expiry ON spent_ids (expires_at);`,
  },
];

/** A ledger for one process; `now` is the clock in milliseconds. */
export function memorySpentLedger(now: () => number = Date.now): SpentLedger {
  const spent = new Map<string, number>();
  return {
    async spend(id, expiresAt) {
      const at = now();
      for (const [old, expiry] of spent) if (expiry <= at) spent.delete(old);
      if (spent.has(id)) return false;
      spent.set(id, expiresAt);
      return true;
    },
    async close() {
      spent.clear();
    },
  };
}

/** The ledger in a SQLite file (the CLI's `--store`): two proxies on one file spend each id once between them. */
export function openSqliteSpentLedger(path: string, now: () => number = Date.now): SpentLedger {
  let opened: Database.Database;
  try {
    opened = openSqliteFile(path, { spent: spentLedgerMigrations });
  } catch (error) {
    throw new ProxyError('store-failed', `cannot open the store ${path}`, { cause: error });
  }
  const statements = prepareStatements(
    opened,
    (database) => ({
      sweep: database.prepare<[number]>('DELETE FROM spent_ids WHERE expires_at <= ?'),
      insert: database.prepare<[string, number]>('INSERT OR IGNORE INTO spent_ids (id, expires_at) VALUES (?, ?)'),
    }),
    'spentLedgerMigrations',
  );
  return {
    async spend(id, expiresAt) {
      statements.sweep.run(now());
      return statements.insert.run(id, expiresAt).changes === 1;
    },
    async close() {
      opened.close();
    },
  };
}
