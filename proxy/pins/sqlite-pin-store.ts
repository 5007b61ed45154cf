import type Database from 'better-sqlite3';
import { type Migration, openStoreFile, prepareStatements } from '../store/apply-migrations';
import { type HeldRow, type PinRow, statusOf, toHeld, toPin } from './pin-rows';
import type { DecisionReport, PinDecision, PinStore, ServerPins, ToolPin } from './types';

/**
 * The pin tables' migrations (SPEC §3.13, §11, docs/pinning.md), oldest first, registered as the
 * `pins` module: the CLI's `--store` file holds them beside the discovery tables. Append to
 * change; never edit a shipped one.
 */
export const pinStoreMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE pinned_servers (
      server TEXT PRIMARY KEY,
      first_listed_at INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE tool_pins (
      server TEXT NOT NULL,
      tool TEXT NOT NULL,
      hash TEXT NOT NULL,
      definition TEXT,
      source TEXT NOT NULL,
      pinned_at INTEGER NOT NULL,
      PRIMARY KEY (server, tool)
    ) STRICT;
    CREATE TABLE tool_pins_held (
      server TEXT NOT NULL,
      tool TEXT NOT NULL,
      reason TEXT NOT NULL,
      hash TEXT NOT NULL,
      definition TEXT NOT NULL,
      diff TEXT NOT NULL,
      seen_at INTEGER NOT NULL,
      PRIMARY KEY (server, tool)
    ) STRICT;
    CREATE TABLE tool_pins_rejected (
      server TEXT NOT NULL,
      tool TEXT NOT NULL,
      hash TEXT NOT NULL,
      rejected_at INTEGER NOT NULL,
      PRIMARY KEY (server, tool, hash)
    ) STRICT;`,
  },
];

/** Options of {@link openSqlitePinStore}. */
export interface SqlitePinStoreOptions {
  /** The database file (created if missing), or `:memory:`; several processes may share a file. */
  readonly path: string;
  /** Milliseconds since the epoch; tests inject a clock. */
  readonly now?: () => number;
}

/**
 * Opens (creating or upgrading) a SQLite file as the pin store (WAL, busy timeout,
 * {@link pinStoreMigrations} applied): the CLI's `--store sqlite:FILE`, shared with the discovery
 * store. `:memory:` is a store for this process only. `close()` closes the file.
 */
export function openSqlitePinStore(options: SqlitePinStoreOptions): PinStore {
  return openStoreFile(options.path, { pins: pinStoreMigrations }, 'pin store', (opened) =>
    createSqlitePinStore(opened, options),
  );
}

/**
 * The pin store on an existing better-sqlite3 handle whose owner has applied
 * {@link pinStoreMigrations}. Every write that reads first (the first pins, a decision) runs in
 * one `BEGIN IMMEDIATE` transaction, so two proxies or an operator and a proxy never interleave
 * inside one. `close()` leaves the handle to its owner.
 */
export function createSqlitePinStore(database: Database.Database, options: { now?: () => number } = {}): PinStore {
  const now = options.now ?? Date.now;
  const statements = prepareStatements(database, prepare, 'pinStoreMigrations');

  const pinFirst = database.transaction((server: string, pins: readonly ToolPin[]) => {
    if (statements.known.get(server) !== undefined) return false;
    statements.addServer.run(server, now());
    for (const pin of pins) {
      statements.upsertPin.run(pin.server, pin.tool, pin.hash, pin.definition ?? null, pin.source, pin.pinnedAt);
    }
    return true;
  });

  const hold = database.transaction((server: string, held: Parameters<PinStore['hold']>[1]) => {
    statements.clearHeld.run(server);
    const at = now();
    for (const tool of held) {
      statements.addHeld.run(
        server,
        tool.tool,
        tool.reason,
        tool.hashes.listed,
        tool.definition,
        JSON.stringify(tool.diff),
        at,
      );
    }
  });

  const decide = database.transaction((decision: PinDecision, server: string, tool: string | undefined) => {
    const waiting = statements.waiting.all(server).filter((row) => tool === undefined || row.tool === tool);
    const at = now();
    for (const row of waiting) {
      if (decision === 'accept') {
        statements.upsertPin.run(server, row.tool, row.hash, row.definition, 'accepted', at);
        statements.forgetHeld.run(server, row.tool);
      } else {
        // The old pin stays; the refused hash is held for good, whatever the server lists later.
        statements.addRejected.run(server, row.tool, row.hash, at);
        statements.markRejected.run(server, row.tool);
      }
    }
    return waiting.map((row) => ({ tool: row.tool, hash: row.hash }));
  });

  return {
    async read(server) {
      const pins = new Map(statements.pinsOf.all(server).map((row) => [row.tool, toPin(row)]));
      const rejected = new Map<string, Set<string>>();
      for (const row of statements.rejectedOf.all(server)) {
        const hashes = rejected.get(row.tool) ?? new Set<string>();
        hashes.add(row.hash);
        rejected.set(row.tool, hashes);
      }
      return { known: statements.known.get(server) !== undefined, pins, rejected } satisfies ServerPins;
    },
    async pinFirst(server, pins) {
      return pinFirst.immediate(server, pins);
    },
    async hold(server, held) {
      hold.immediate(server, held);
    },
    async held(server) {
      const rows = server === undefined ? statements.allHeld.all() : statements.heldOf.all(server);
      return rows.map(toHeld);
    },
    async status(server) {
      const pins = server === undefined ? statements.allPins.all() : statements.pinsOf.all(server);
      const held = server === undefined ? statements.allHeld.all() : statements.heldOf.all(server);
      return statusOf(pins, held);
    },
    async pin(server, tool) {
      const row = statements.pinOf.get(server, tool);
      return row === undefined ? undefined : toPin(row);
    },
    async decide(decision, server, tool) {
      const tools = decide.immediate(decision, server, tool);
      return { decision, server, tools } satisfies DecisionReport;
    },
    async close() {
      // The handle is its owner's.
    },
  };
}

function prepare(database: Database.Database) {
  return {
    known: database.prepare<[string]>('SELECT 1 FROM pinned_servers WHERE server = ?'),
    addServer: database.prepare<[string, number]>(
      'INSERT OR IGNORE INTO pinned_servers (server, first_listed_at) VALUES (?, ?)',
    ),
    upsertPin: database.prepare<[string, string, string, string | null, string, number]>(
      `INSERT INTO tool_pins (server, tool, hash, definition, source, pinned_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (server, tool) DO UPDATE SET hash = excluded.hash, definition = excluded.definition,
         source = excluded.source, pinned_at = excluded.pinned_at`,
    ),
    pinsOf: database.prepare<[string], PinRow>('SELECT * FROM tool_pins WHERE server = ? ORDER BY tool'),
    allPins: database.prepare<[], PinRow>('SELECT * FROM tool_pins ORDER BY server, tool'),
    pinOf: database.prepare<[string, string], PinRow>('SELECT * FROM tool_pins WHERE server = ? AND tool = ?'),
    clearHeld: database.prepare<[string]>('DELETE FROM tool_pins_held WHERE server = ?'),
    addHeld: database.prepare<[string, string, string, string, string, string, number]>(
      `INSERT INTO tool_pins_held (server, tool, reason, hash, definition, diff, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (server, tool) DO UPDATE SET reason = excluded.reason, hash = excluded.hash,
         definition = excluded.definition, diff = excluded.diff, seen_at = excluded.seen_at`,
    ),
    heldOf: database.prepare<[string], HeldRow>('SELECT * FROM tool_pins_held WHERE server = ? ORDER BY tool'),
    allHeld: database.prepare<[], HeldRow>('SELECT * FROM tool_pins_held ORDER BY server, tool'),
    waiting: database.prepare<[string], HeldRow>(
      "SELECT * FROM tool_pins_held WHERE server = ? AND reason IN ('changed', 'new') ORDER BY tool",
    ),
    forgetHeld: database.prepare<[string, string]>('DELETE FROM tool_pins_held WHERE server = ? AND tool = ?'),
    markRejected: database.prepare<[string, string]>(
      "UPDATE tool_pins_held SET reason = 'rejected' WHERE server = ? AND tool = ?",
    ),
    addRejected: database.prepare<[string, string, string, number]>(
      'INSERT OR IGNORE INTO tool_pins_rejected (server, tool, hash, rejected_at) VALUES (?, ?, ?, ?)',
    ),
    rejectedOf: database.prepare<[string], { tool: string; hash: string }>(
      'SELECT tool, hash FROM tool_pins_rejected WHERE server = ?',
    ),
  };
}
