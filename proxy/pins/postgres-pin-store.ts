import type pg from 'pg';
import type { Migration } from '../store/apply-migrations';
import { inTransaction } from '../store/apply-postgres-migrations';
import { listenPostgresChannel } from '../store/listen-postgres-channel';
import { openPostgresPool } from '../store/open-postgres-pool';
import { type HeldRow, type PinRow, statusOf, toHeld, toPin } from './pin-rows';
import type { PinStore, ServerPins } from './types';

/**
 * The pin tables on PostgreSQL (SPEC §3.13, §11), registered as module `pins` like SQLite's, with
 * the same columns; times are milliseconds since the epoch. Append to change; never edit a
 * shipped one.
 */
export const postgresPinStoreMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE pinned_servers (
      server TEXT PRIMARY KEY,
      first_listed_at BIGINT NOT NULL
    );
    CREATE TABLE tool_pins (
      server TEXT NOT NULL,
      tool TEXT NOT NULL,
      hash TEXT NOT NULL,
      definition TEXT,
      source TEXT NOT NULL,
      pinned_at BIGINT NOT NULL,
      PRIMARY KEY (server, tool)
    );
    CREATE TABLE tool_pins_held (
      server TEXT NOT NULL,
      tool TEXT NOT NULL,
      reason TEXT NOT NULL,
      hash TEXT NOT NULL,
      definition TEXT NOT NULL,
      diff TEXT NOT NULL,
      seen_at BIGINT NOT NULL,
      PRIMARY KEY (server, tool)
    );
    CREATE TABLE tool_pins_rejected (
      server TEXT NOT NULL,
      tool TEXT NOT NULL,
      hash TEXT NOT NULL,
      rejected_at BIGINT NOT NULL,
      PRIMARY KEY (server, tool, hash)
    );`,
  },
];

/** Options of {@link openPostgresPinStore}. */
export interface PostgresPinStoreOptions {
  /** `postgres://…`; every replica on one database sees the same pins. */
  readonly url: string;
  /** Milliseconds since the epoch; tests inject a clock. */
  readonly now?: () => number;
}

/** Opens the pin store on a PostgreSQL database, with {@link postgresPinStoreMigrations} applied; `close()` ends its pool. */
export async function openPostgresPinStore(options: PostgresPinStoreOptions): Promise<PinStore> {
  const pool = await openPostgresPool({
    url: options.url,
    migrations: { pins: postgresPinStoreMigrations },
    what: 'pin store',
  });
  return { ...createPostgresPinStore(pool, options), close: () => pool.end() };
}

/**
 * The channel a decision is announced on, with no payload: a replica that hears it checks every
 * server's last listing against the store again, which reads what changed.
 */
const decisionChannel = 'pin_decisions';

// BIGINT columns arrive as strings from node-postgres; the rows read as numbers.
const pinColumns = 'server, tool, hash, definition, source, pinned_at::float8 AS pinned_at';
const heldColumns = 'server, tool, reason, hash, definition, diff, seen_at::float8 AS seen_at';

/**
 * The pin store on a pool whose owner has applied {@link postgresPinStoreMigrations}. Every write
 * is one transaction that first takes a transaction-level advisory lock on the server's name, so
 * the writes of one server (first pins, a listing held, the operator's decision) take turns
 * across every replica, as SQLite's single writer makes them; other servers go on meanwhile.
 * `close()` leaves the pool to its owner.
 */
export function createPostgresPinStore(pool: pg.Pool, options: { now?: () => number } = {}): PinStore {
  const now = options.now ?? Date.now;
  /** Runs `work` in a transaction holding the lock of `server`'s pins. */
  const forServer = async <T>(server: string, work: (client: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    try {
      return await inTransaction(client, async () => {
        await client.query("SELECT pg_advisory_xact_lock(hashtextextended('emcp-pins/' || $1, 0))", [server]);
        return work(client);
      });
    } finally {
      client.release();
    }
  };
  const upsertPin = `INSERT INTO tool_pins (server, tool, hash, definition, source, pinned_at) VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (server, tool) DO UPDATE SET hash = excluded.hash, definition = excluded.definition,
      source = excluded.source, pinned_at = excluded.pinned_at`;
  const pinsOf = (server: string) =>
    pool.query<PinRow>(`SELECT ${pinColumns} FROM tool_pins WHERE server = $1 ORDER BY tool COLLATE "C"`, [server]);
  const allPins = () =>
    pool.query<PinRow>(`SELECT ${pinColumns} FROM tool_pins ORDER BY server COLLATE "C", tool COLLATE "C"`);
  const heldOf = (server: string) =>
    pool.query<HeldRow>(`SELECT ${heldColumns} FROM tool_pins_held WHERE server = $1 ORDER BY tool COLLATE "C"`, [
      server,
    ]);
  const allHeld = () =>
    pool.query<HeldRow>(`SELECT ${heldColumns} FROM tool_pins_held ORDER BY server COLLATE "C", tool COLLATE "C"`);

  return {
    async read(server) {
      const [known, pins, rejectedRows] = await Promise.all([
        pool.query('SELECT 1 FROM pinned_servers WHERE server = $1', [server]),
        pinsOf(server),
        pool.query<{ tool: string; hash: string }>('SELECT tool, hash FROM tool_pins_rejected WHERE server = $1', [
          server,
        ]),
      ]);
      const rejected = new Map<string, Set<string>>();
      for (const row of rejectedRows.rows) {
        const hashes = rejected.get(row.tool) ?? new Set<string>();
        hashes.add(row.hash);
        rejected.set(row.tool, hashes);
      }
      return {
        known: known.rowCount === 1,
        pins: new Map(pins.rows.map((row) => [row.tool, toPin(row)])),
        rejected,
      } satisfies ServerPins;
    },
    async pinFirst(server, pins) {
      return forServer(server, async (client) => {
        // The primary key decides who pinned first; the loser writes nothing.
        const added = await client.query(
          'INSERT INTO pinned_servers (server, first_listed_at) VALUES ($1, $2) ON CONFLICT (server) DO NOTHING',
          [server, now()],
        );
        if (added.rowCount !== 1) return false;
        for (const pin of pins) {
          await client.query(upsertPin, [
            pin.server,
            pin.tool,
            pin.hash,
            pin.definition ?? null,
            pin.source,
            pin.pinnedAt,
          ]);
        }
        return true;
      });
    },
    async hold(server, held) {
      await forServer(server, async (client) => {
        await client.query('DELETE FROM tool_pins_held WHERE server = $1', [server]);
        const at = now();
        for (const tool of held) {
          await client.query(
            `INSERT INTO tool_pins_held (server, tool, reason, hash, definition, diff, seen_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (server, tool) DO UPDATE SET reason = excluded.reason, hash = excluded.hash,
               definition = excluded.definition, diff = excluded.diff, seen_at = excluded.seen_at`,
            [server, tool.tool, tool.reason, tool.hashes.listed, tool.definition, JSON.stringify(tool.diff), at],
          );
        }
      });
    },
    async held(server) {
      const rows = server === undefined ? await allHeld() : await heldOf(server);
      return rows.rows.map(toHeld);
    },
    async status(server) {
      const [pins, held] =
        server === undefined
          ? await Promise.all([allPins(), allHeld()])
          : await Promise.all([pinsOf(server), heldOf(server)]);
      return statusOf(pins.rows, held.rows);
    },
    async pin(server, tool) {
      const found = await pool.query<PinRow>(`SELECT ${pinColumns} FROM tool_pins WHERE server = $1 AND tool = $2`, [
        server,
        tool,
      ]);
      const row = found.rows[0];
      return row === undefined ? undefined : toPin(row);
    },
    async decide(decision, server, tool) {
      const tools = await forServer(server, async (client) => {
        const waiting = await client.query<HeldRow>(
          `SELECT ${heldColumns} FROM tool_pins_held WHERE server = $1 AND reason IN ('changed', 'new') ORDER BY tool COLLATE "C"`,
          [server],
        );
        const chosen = waiting.rows.filter((row) => tool === undefined || row.tool === tool);
        const at = now();
        for (const row of chosen) {
          if (decision === 'accept') {
            await client.query(upsertPin, [server, row.tool, row.hash, row.definition, 'accepted', at]);
            await client.query('DELETE FROM tool_pins_held WHERE server = $1 AND tool = $2', [server, row.tool]);
          } else {
            // The old pin stays; the refused hash is held for good, whatever the server lists later.
            await client.query(
              `INSERT INTO tool_pins_rejected (server, tool, hash, rejected_at) VALUES ($1, $2, $3, $4)
               ON CONFLICT DO NOTHING`,
              [server, row.tool, row.hash, at],
            );
            await client.query("UPDATE tool_pins_held SET reason = 'rejected' WHERE server = $1 AND tool = $2", [
              server,
              row.tool,
            ]);
          }
        }
        // Every replica on this database re-checks its listings once this commits (docs/pinning.md).
        if (chosen.length > 0) await client.query(`SELECT pg_notify('${decisionChannel}', '')`);
        return chosen.map((row) => ({ tool: row.tool, hash: row.hash }));
      });
      return { decision, server, tools };
    },
    watch(onDecision) {
      return listenPostgresChannel(pool, {
        channel: decisionChannel,
        onNotification: () => onDecision('decision'),
        // A decision committed while nobody listened is read by checking again.
        onState: (state) => state === 'listening' && onDecision('connected'),
      });
    },
    async close() {
      // The pool is its owner's.
    },
  };
}
