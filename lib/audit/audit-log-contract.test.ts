/**
 * One contract for every audit log (SPEC §8, §11), on the household SQLite file and on PostgreSQL:
 * one hash chain, appended in one serial order, read back filtered, and delivered live to
 * subscribers, whichever handle appended. The shared part uses two handles on one database (two
 * SQLite connections, two `pg` pools): 100 concurrent appends make one gap-free chain the verifier
 * accepts, a row edited in the database is named by it, and a subscriber on one handle sees every
 * row the other appends. PostgreSQL only: the listener's connection killed while rows flow.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresPool } from '../../proxy/index';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../../tests/support/postgres';
import { readHouseholdEnv } from '../env';
import type { HouseholdEvent } from '../events';
import { type OpenIdentity, openIdentity } from '../start-identity';
import { householdStoreLocation, openHouseholdStore, openSqliteHouseholdStore } from '../store';
import { createAuditCheckpoints } from './audit-checkpoints';
import { type AuditEntry, type AuditLog, createSqliteAuditLog } from './audit-log';
import { createFileCheckpointStore } from './checkpoint-store';
import { genesisHash, hashAuditRow } from './hash-audit-row';
import { createPostgresAuditLog, type PostgresAuditLogOptions, postgresAuditMigrations } from './postgres-audit-log';
import { verifyAuditChain } from './verify-audit-chain';

const closers: (() => Promise<void> | void)[] = [];
const folders: string[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

const folder = (prefix: string) => {
  const made = mkdtempSync(join(tmpdir(), prefix));
  folders.push(made);
  return made;
};

/** The household whose admin signs the checkpoints the verifier checks. */
let identity: OpenIdentity;
beforeAll(async () => {
  const env = readHouseholdEnv({ EXTENSIBLE_MCP_DATA: mkdtempSync(join(tmpdir(), 'audit-admin-')) });
  identity = await openIdentity(env, { store: await openHouseholdStore(householdStoreLocation(env)) });
});
afterAll(() => identity?.close());

/** Each implementation: a fresh location, an independent handle on it, and SQL run there as its owner would. */
const implementations: Record<
  string,
  {
    location(): Promise<string>;
    open(location: string, options?: PostgresAuditLogOptions): Promise<AuditLog>;
    /** Runs `sql` on the database (first its append-only triggers switched off when `untriggered`). */
    sql(location: string, sql: string, untriggered?: boolean): Promise<void>;
  }
> = {
  sqlite: {
    location: async () => {
      const path = join(folder('audit-contract-'), 'household.sqlite');
      openSqliteHouseholdStore({ path }).close();
      return path;
    },
    open: async (path) => {
      const database = new Database(path);
      database.pragma('busy_timeout = 5000');
      closers.push(() => {
        database.close();
      });
      return createSqliteAuditLog(database, { pollMs: 20 });
    },
    sql: async (path, sql, untriggered = false) => {
      const database = new Database(path);
      try {
        if (untriggered) {
          database.exec(`DROP TRIGGER audit_log_append_only_update; DROP TRIGGER audit_log_append_only_delete;
            DROP TRIGGER audit_log_append_in_order;`);
        }
        database.exec(sql);
      } finally {
        database.close();
      }
    },
  },
  ...(postgresAvailable && {
    postgres: {
      location: createTestDatabase,
      open: async (url: string, options?: PostgresAuditLogOptions) => {
        const pool = await openPostgresPool({ url, migrations: { audit: postgresAuditMigrations }, what: 'audit log' });
        closers.push(() => pool.end());
        return createPostgresAuditLog(pool, options);
      },
      sql: async (url: string, sql: string, untriggered = false) => {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          if (untriggered) await client.query('ALTER TABLE audit_log DISABLE TRIGGER USER');
          await client.query(sql);
        } finally {
          await client.end();
        }
      },
    },
  }),
};

it.skipIf(postgresAvailable)(`the PostgreSQL audit log is skipped: ${postgresUnavailable}`, () => {});

let counter = 0;
function event(overrides: Partial<HouseholdEvent> = {}): HouseholdEvent {
  counter += 1;
  return {
    at: '2026-11-30T12:00:00.000Z',
    source: 'proxy',
    kind: 'call-decision',
    outcome: 'allow',
    session: 'session-a',
    message: `event ${counter}`,
    data: { tool: 'payments__charge_invoice', durationUs: 12.5 },
    ...overrides,
  };
}

/** Collects what a subscription delivers, and resolves once it has `count` entries. */
function collect(log: AuditLog, count: number, after?: number) {
  const ids: number[] = [];
  let done: () => void = () => undefined;
  const complete = new Promise<void>((resolve) => {
    done = resolve;
  });
  const unsubscribe = log.subscribe(
    (entry) => {
      ids.push(entry.id);
      if (ids.length >= count) done();
    },
    after === undefined ? {} : { after },
  );
  closers.push(unsubscribe);
  return { ids, complete, unsubscribe };
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, index) => from + index);

describe.each(Object.entries(implementations))('the %s audit log', (name, kind) => {
  describe('single instance', () => {
    it('chains each appended row to the one before it, from the genesis value', async () => {
      const audit = await kind.open(await kind.location());
      expect(await audit.head()).toEqual({ rowId: 0, hash: genesisHash });
      const first = await audit.append(event());
      const second = await audit.append(event({ outcome: 'deny', orderId: 'urn:uuid:order-1' }));
      expect(first).toMatchObject({ id: 1, prevHash: genesisHash });
      expect(second).toMatchObject({ id: 2, prevHash: first.hash });
      expect(first.hash).toBe(hashAuditRow({ id: 1, prevHash: genesisHash, event: first.event }));
      expect(second.hash).toBe(hashAuditRow({ id: 2, prevHash: first.hash, event: second.event }));
      expect(await audit.head()).toEqual({ rowId: 2, hash: second.hash });
      expect(await audit.rows(0, 10)).toEqual([
        expect.objectContaining({ id: 1, prevHash: genesisHash, hash: first.hash }),
        expect.objectContaining({ id: 2, prevHash: first.hash, hash: second.hash }),
      ]);
    });

    it('gives appends made without waiting the ids in the order they were made, each resolving once committed', async () => {
      // The event bus relies on it: it hands the table a burst of events at once, in emission order.
      const audit = await kind.open(await kind.location());
      const made = range(1, 60).map((index) => audit.append(event({ message: `append ${index}` })));
      const entries = await Promise.all(made);
      expect(entries.map((entry) => [entry.id, entry.event.message])).toEqual(
        range(1, 60).map((index) => [index, `append ${index}`]),
      );
      expect(await audit.after(0, { limit: 100 })).toEqual(entries);
    });

    it('refuses an event that fails the schema and writes nothing', async () => {
      const audit = await kind.open(await kind.location());
      await expect(audit.append({ ...event(), kind: 'NotKebab' })).rejects.toThrow();
      await expect(audit.append({ ...event(), token: 'secret' } as HouseholdEvent)).rejects.toThrow();
      expect((await audit.head()).rowId).toBe(0);
    });

    it('records an event carrying a lone surrogate or a NUL, made well-formed, instead of losing it', async () => {
      const audit = await kind.open(await kind.location());
      const entry = await audit.append(event({ message: 'call \uD800 refused', session: 'a\u0000b' }));
      expect(entry.event).toMatchObject({ message: 'call \uFFFD refused', session: 'a\uFFFDb' });
      expect((await audit.after(0, { filter: { session: 'a\uFFFDb' } }))[0]?.event.message).toBe('call \uFFFD refused');
    });

    it('reads entries after an id, in order, filtered and limited', async () => {
      const audit = await kind.open(await kind.location());
      await audit.append(event({ session: 'a', kind: 'call-decision', outcome: 'allow' }));
      await audit.append(event({ session: 'b', kind: 'call-decision', outcome: 'deny', orderId: 'o-1' }));
      await audit.append(event({ session: 'a', kind: 'charge-succeeded', outcome: 'ok', orderId: 'o-1' }));
      await audit.append(event({ session: 'a', kind: 'call-decision', outcome: 'deny' }));
      const ids = (entries: readonly AuditEntry[]) => entries.map((entry) => entry.id);
      expect(ids(await audit.after(0))).toEqual([1, 2, 3, 4]);
      expect(ids(await audit.after(2))).toEqual([3, 4]);
      expect(ids(await audit.after(0, { limit: 2 }))).toEqual([1, 2]);
      expect(ids(await audit.after(0, { filter: { session: 'a' } }))).toEqual([1, 3, 4]);
      expect(ids(await audit.after(0, { filter: { outcome: 'deny' } }))).toEqual([2, 4]);
      expect(ids(await audit.after(0, { filter: { kind: 'call-decision', session: 'a' } }))).toEqual([1, 4]);
      expect(ids(await audit.after(1, { filter: { orderId: 'o-1' } }))).toEqual([2, 3]);
      expect(ids(await audit.forOrder('o-1'))).toEqual([2, 3]);
      expect(await audit.after(4)).toEqual([]);
      await expect(audit.after(-1)).rejects.toThrow();
      await expect(audit.after(0, { limit: 0 })).rejects.toThrow();
    });

    it('tells subscribers of each appended entry, in order, from where they asked; a throwing one stops nobody', async () => {
      const audit = await kind.open(await kind.location());
      await audit.append(event());
      closers.push(
        audit.subscribe(() => {
          throw new Error('a closed stream');
        }),
      );
      // From the head, named: a subscription without `after` reads the head itself, asynchronously,
      // and on a loaded machine the next append could commit before that read (a run timed out so).
      const fromHead = collect(audit, 2, 1);
      const fromStart = collect(audit, 3, 0);
      await audit.append(event());
      await audit.append(event());
      await Promise.all([fromHead.complete, fromStart.complete]);
      expect(fromHead.ids).toEqual([2, 3]);
      expect(fromStart.ids).toEqual([1, 2, 3]);
      fromHead.unsubscribe();
      const last = collect(audit, 1, 3);
      await audit.append(event());
      await last.complete;
      expect(fromHead.ids).toEqual([2, 3]);
    });

    it('refuses UPDATE, DELETE and an insert that skips an id, by trigger', async () => {
      const location = await kind.location();
      const audit = await kind.open(location);
      await audit.append(event());
      await audit.append(event());
      await expect(kind.sql(location, "UPDATE audit_log SET event = '{}' WHERE id = 1")).rejects.toThrow(/append-only/);
      await expect(kind.sql(location, 'DELETE FROM audit_log WHERE id = 2')).rejects.toThrow(/append-only/);
      await expect(
        kind.sql(
          location,
          `INSERT INTO audit_log (id, event, prev_hash, hash) VALUES (5, '{}', '${genesisHash}', '${genesisHash}')`,
        ),
      ).rejects.toThrow(/next id/);
      expect((await audit.after(0)).map((entry) => entry.id)).toEqual([1, 2]);
    });
  });

  describe('shared: two handles on one database', () => {
    /** The verifier's verdict on the chain, under a checkpoint the admin signs now. */
    const verify = async (audit: AuditLog) => {
      const checkpoints = createFileCheckpointStore(join(folder('audit-checkpoints-'), 'audit-checkpoints.jsonl'));
      const signer = createAuditCheckpoints({ audit, household: identity.household, store: checkpoints });
      await signer.close();
      return verifyAuditChain({
        audit,
        checkpoints,
        adminDid: identity.household.adminDid,
        adminJwk: identity.household.adminJwk,
      });
    };

    it('makes one gap-free chain of 100 concurrent appends through two handles, which the verifier accepts', async () => {
      const location = await kind.location();
      const both = [await kind.open(location), await kind.open(location)];
      const entries = await Promise.all(
        range(1, 100).map((index) => (both[index % 2] as AuditLog).append(event({ message: `append ${index}` }))),
      );
      expect(entries.map((entry) => entry.id).sort((a, b) => a - b)).toEqual(range(1, 100));
      const [a, b] = await Promise.all(both.map((audit) => audit.after(0, { limit: 1000 })));
      expect(a).toEqual(b);
      for (const [index, entry] of (a ?? []).entries()) {
        expect(entry.prevHash).toBe(index === 0 ? genesisHash : a?.[index - 1]?.hash);
      }
      expect(await verify(both[1] as AuditLog)).toMatchObject({ ok: true, rows: 100 });
    });

    it('names a row edited in the database, even with every trigger switched off', async () => {
      const location = await kind.location();
      const writer = await kind.open(location);
      for (const index of range(1, 8)) await writer.append(event({ message: `row ${index}` }));
      const reader = await kind.open(location);
      expect(await verify(reader)).toMatchObject({ ok: true, rows: 8 });
      await kind.sql(location, "UPDATE audit_log SET event = replace(event, 'row 5', 'row X') WHERE id = 5", true);
      expect(await verify(reader)).toMatchObject({ ok: false, rowId: 5 });
    });

    it('links the next row to the head as stored, even when the database changed it after this handle wrote it', async () => {
      // A handle may hash its next rows on the head it remembers; the table links them to the one it holds.
      const location = await kind.location();
      const writer = await kind.open(location);
      await writer.append(event());
      await writer.append(event());
      const edited = 'e'.repeat(64);
      await kind.sql(location, `UPDATE audit_log SET hash = '${edited}' WHERE id = 2`, true);
      const next = await writer.append(event());
      expect(next).toMatchObject({ id: 3, prevHash: edited });
      expect((await writer.rows(2, 1))[0]).toMatchObject({ id: 3, prevHash: edited, hash: next.hash });
    });

    it(`delivers to a subscriber on one handle every row the other appends, in order, once (${name})`, async () => {
      const location = await kind.location();
      const writer = await kind.open(location);
      const reader = await kind.open(location);
      await writer.append(event());
      const seen = collect(reader, 40, 0);
      for (const index of range(1, 20)) await writer.append(event({ message: `sequential ${index}` }));
      await Promise.all(range(1, 19).map(() => writer.append(event())));
      await seen.complete;
      expect(seen.ids).toEqual(range(1, 40));
    });

    it(`delivers every row once, in order, to a subscriber on each of two handles appending at once (${name})`, async () => {
      // Each handle hashes a batch on the head it last knew, and the other's appends move it: a
      // batch is hashed again on the head the table returns. A handle's own notifications up to
      // the batch it is appending are left to that batch's end, never another handle's beyond it.
      const location = await kind.location();
      const both = [await kind.open(location), await kind.open(location)] as const;
      const seen = both.map((audit) => collect(audit, 120, 0));
      for (const round of range(1, 3)) {
        await Promise.all(
          range(1, 40).map((index) =>
            (index % 2 === 0 ? both[0] : both[1]).append(event({ message: `round ${round} append ${index}` })),
          ),
        );
      }
      await Promise.all(seen.map((subscription) => subscription.complete));
      for (const subscription of seen) expect(subscription.ids).toEqual(range(1, 120));
      expect(await verify(both[0])).toMatchObject({ ok: true, rows: 120 });
    });
  });
});

describe.skipIf(!postgresAvailable)('the PostgreSQL audit log listener', () => {
  it('sees every row exactly once, without a gap, when its connection is killed while rows flow', async () => {
    const url = await createTestDatabase();
    const { open } = implementations.postgres as (typeof implementations)['sqlite'];
    const writer = await open(url);
    // The listener's states, as a queue the test waits on.
    const states: string[] = [];
    let changed: () => void = () => undefined;
    const next = async (state: string) => {
      while (!states.includes(state)) {
        await new Promise<void>((resolve) => {
          changed = resolve;
        });
      }
      states.splice(states.indexOf(state), 1);
    };
    // A slow first reconnect, so the rows appended while it is down are not announced to it.
    const reader = await open(url, {
      reconnect: { first: 2000, max: 4000 },
      onListener: (state) => {
        states.push(state);
        changed();
      },
    });
    const seen = collect(reader, 120, 0);
    await next('listening');
    await Promise.all(range(1, 60).map(() => writer.append(event())));
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    closers.push(() => admin.end());
    const listeners = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN audit_rows'",
    );
    expect(listeners.rows).toHaveLength(1);
    await admin.query('SELECT pg_terminate_backend($1)', [listeners.rows[0]?.pid]);
    await next('lost');
    await Promise.all(range(61, 120).map(() => writer.append(event())));
    await next('listening');
    await seen.complete;
    expect(seen.ids).toEqual(range(1, 120));
  });

  it("reads the rows another handle committed while this handle's own append was still answering", async () => {
    // A notification up to the batch a handle is appending is left to that batch's end; one
    // beyond it (another handle's later rows) must still be read, or the subscriber waits for them
    // until the next notification.
    const url = await createTestDatabase();
    const pool = await openPostgresPool({ url, migrations: { audit: postgresAuditMigrations }, what: 'audit log' });
    closers.push(() => pool.end());
    let answered: () => void = () => undefined;
    const committed = new Promise<void>((resolve) => {
      answered = resolve;
    });
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    // The pool of handle A, whose first append's answer (committed at the server) waits for the test.
    let held = false;
    const slow = Object.create(pool) as pg.Pool;
    slow.query = (async (...args: Parameters<pg.Pool['query']>) => {
      const result = await (pool.query as (...given: unknown[]) => Promise<unknown>)(...args);
      if (!held && String(args[0]).includes('audit_log_append')) {
        held = true;
        answered();
        await released;
      }
      return result;
    }) as pg.Pool['query'];
    let listening: () => void = () => undefined;
    const listens = new Promise<void>((resolve) => {
      listening = resolve;
    });
    const a = createPostgresAuditLog(slow, {
      onListener: (state) => {
        if (state === 'listening') listening();
      },
    });
    const b = await (implementations.postgres as (typeof implementations)['sqlite']).open(url);
    const seen = collect(a, 2, 0);
    await listens;
    const first = a.append(event({ message: 'through A' }));
    await committed;
    await b.append(event({ message: 'through B, while A is answered' }));
    await seen.complete;
    release();
    expect((await first).id).toBe(1);
    expect(seen.ids).toEqual([1, 2]);
  });
});

describe.skipIf(!postgresAvailable)('the PostgreSQL audit table', () => {
  it('refuses TRUNCATE, hashes that are not 64 characters, and an id below 1 even with the next-id trigger off', async () => {
    const url = await createTestDatabase();
    const { open } = implementations.postgres as (typeof implementations)['sqlite'];
    const audit = await open(url);
    await audit.append(event());
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await expect(client.query('TRUNCATE audit_log')).rejects.toThrow(/append-only: TRUNCATE refused/);
      // The store always writes SHA-256 hex: only SQL reaches these, with the next id.
      const insert = (id: number, previous: string, hash: string) =>
        client.query(
          `INSERT INTO audit_log (id, event, prev_hash, hash) VALUES (${id}, '{}', '${previous}', '${hash}')`,
        );
      await expect(insert(2, 'short', genesisHash)).rejects.toThrow(/audit_log_prev_hash_check/);
      await expect(insert(2, genesisHash, 'short')).rejects.toThrow(/audit_log_hash_check/);
      // The trigger asks for the next id, so the check on the id is the line behind it.
      await client.query('BEGIN');
      await client.query('ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_in_order');
      await expect(insert(0, genesisHash, genesisHash)).rejects.toThrow(/audit_log_id_check/);
      await client.query('ROLLBACK');
      expect((await audit.after(0)).map((entry) => entry.id)).toEqual([1]);
    } finally {
      await client.end();
    }
  });

  it('keeps one row per id when two writers skip the lock and race for the same next id', async () => {
    const url = await createTestDatabase();
    const { open } = implementations.postgres as (typeof implementations)['sqlite'];
    await (await open(url)).append(event());
    const writers = [new pg.Client({ connectionString: url }), new pg.Client({ connectionString: url })] as const;
    await Promise.all(writers.map((writer) => writer.connect()));
    try {
      const insert = (writer: pg.Client) =>
        writer.query(
          `INSERT INTO audit_log (id, event, prev_hash, hash) VALUES (2, '{}', '${genesisHash}', '${genesisHash}')`,
        );
      const pid = (await writers[1].query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
      // Both see the head at 1, so the next-id trigger lets both through: only the key decides.
      await Promise.all(writers.map((writer) => writer.query('BEGIN')));
      await insert(writers[0]);
      let settled = false;
      const settle = () => {
        settled = true;
      };
      const second = insert(writers[1]);
      // Handled at once: it is refused while the first commits, before the expectation below.
      void second.then(settle, settle);
      // Commit the first once the second waits on its row (its trigger has run), or has finished.
      const waiting = `SELECT 1 FROM pg_stat_activity WHERE pid = ${pid} AND wait_event_type = 'Lock'`;
      while (!settled && (await writers[0].query(waiting)).rowCount === 0);
      await writers[0].query('COMMIT');
      await expect(second).rejects.toThrow(/audit_log_pkey/);
      await writers[1].query('ROLLBACK');
      const rows = await writers[0].query<{ id: string }>('SELECT id FROM audit_log ORDER BY id');
      expect(rows.rows.map((row) => Number(row.id))).toStrictEqual([1, 2]);
    } finally {
      await Promise.all(writers.map((writer) => writer.end()));
    }
  });
});
