/**
 * One contract for every chat store (SPEC §8, §11), memory, SQLite and PostgreSQL: ids 1, 2, 3…
 * per session, one secret per session. The shared part opens two handles on one location (two
 * SQLite connections, two PostgreSQL pools) and appends through both at once: every id is used
 * once, and a reader resuming with `after(id)` meanwhile never skips one.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { openPostgresPool } from '../../proxy/index';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../../tests/support/postgres';
import { applyMigrations } from '../apply-migrations';
import { type ChatStore, chatMigrations, createMemoryChatStore, createSqliteChatStore } from './chat-store';
import { createPostgresChatStore, postgresChatMigrations } from './postgres-chat-store';
import type { ChatEvent } from './types';

const closers: (() => Promise<void>)[] = [];
const folders: string[] = [];
afterEach(async () => {
  await Promise.allSettled(closers.splice(0).map((close) => close()));
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

/** Each implementation: a fresh location, and a way to open an independent handle on it. */
const implementations: Record<
  string,
  { shared: boolean; location(): Promise<string>; open(location: string): Promise<ChatStore> }
> = {
  memory: { shared: false, location: async () => '', open: async () => createMemoryChatStore() },
  sqlite: {
    shared: true,
    location: async () => {
      const folder = await mkdtemp(join(tmpdir(), 'chat-store-'));
      folders.push(folder);
      return join(folder, 'household.sqlite');
    },
    open: async (path) => {
      const database = new Database(path);
      closers.push(async () => {
        database.close();
      });
      // As the household store opens it.
      database.pragma('journal_mode = WAL');
      database.pragma('busy_timeout = 5000');
      database.pragma('foreign_keys = ON');
      applyMigrations(database, { chat: chatMigrations });
      return createSqliteChatStore(database);
    },
  },
  ...(postgresAvailable && {
    postgres: {
      shared: true,
      location: createTestDatabase,
      open: async (url: string) => {
        const pool = await openPostgresPool({ url, migrations: { chat: postgresChatMigrations }, what: 'chat store' });
        closers.push(() => pool.end());
        return createPostgresChatStore(pool);
      },
    },
  }),
};

it.skipIf(postgresAvailable)(`the PostgreSQL chat store is skipped: ${postgresUnavailable}`, () => {});

const at = '2030-01-01T00:00:00.000Z';

describe.each(Object.entries(implementations))('the %s chat store', (_name, kind) => {
  const open = async (location?: string) => kind.open(location ?? (await kind.location()));

  describe('single instance', () => {
    it('numbers events 1, 2, 3… per session, independently of other sessions', async () => {
      const store = await open();
      await store.createSession('a', at);
      await store.createSession('b', at);
      const later = '2030-01-01T00:00:01.000Z';
      const first = await store.append('a', { type: 'user-message', text: 'menu' }, later);
      await store.append('b', { type: 'turn-started' }, later);
      const second = await store.append('a', { type: 'turn-ended', reason: 'done' }, later);
      expect([first.id, second.id]).toEqual([1, 2]);
      expect(first).toEqual({ id: 1, at: later, type: 'user-message', text: 'menu' });
      expect((await store.after('a', 0)).map((event) => event.id)).toEqual([1, 2]);
      expect(await store.after('a', 1)).toEqual([second]);
      expect((await store.after('b', 0)).map((event) => event.type)).toEqual(['turn-started']);
    });

    it('knows its sessions, creates one twice as once, and refuses an append to an unknown one', async () => {
      const store = await open();
      await store.createSession('a', at);
      await store.append('a', { type: 'turn-started' }, at);
      await store.createSession('a', at);
      expect(await store.hasSession('a')).toBe(true);
      expect(await store.hasSession('forged')).toBe(false);
      expect((await store.after('a', 0)).map((event) => event.id)).toEqual([1]);
      await expect(store.append('forged', { type: 'turn-started' }, at)).rejects.toThrow(/unknown chat session/);
      expect(await store.after('forged', 0)).toEqual([]);
      expect(await store.hasSession('forged')).toBe(false);
    });

    it('opens a session by the hash of its secret only, one secret per session and one session per secret', async () => {
      const store = await open();
      await store.createSession('a', at);
      await store.createSession('b', at);
      await store.bindSecret('a', 'hash-a');
      expect(await store.sessionOfSecret('hash-a')).toBe('a');
      expect(await store.sessionOfSecret('a')).toBeUndefined();
      expect(await store.sessionOfSecret('hash-b')).toBeUndefined();
      // Neither a second secret for a, nor a's secret for b, nor a secret for a session that does not exist.
      await expect(store.bindSecret('a', 'hash-a2')).rejects.toThrow();
      await expect(store.bindSecret('b', 'hash-a')).rejects.toThrow();
      await expect(store.bindSecret('forged', 'hash-f')).rejects.toThrow();
      expect(await store.sessionOfSecret('hash-a')).toBe('a');
      expect(await store.sessionOfSecret('hash-a2')).toBeUndefined();
      expect(await store.sessionOfSecret('hash-f')).toBeUndefined();
    });
  });

  describe.skipIf(!kind.shared)('shared: two handles on one location', () => {
    const twoHandles = async () => {
      const location = await kind.location();
      return [await open(location), await open(location)] as const;
    };

    it('keeps sessions and events across a reopen, and continues their ids', async () => {
      const location = await kind.location();
      const before = await open(location);
      await before.createSession('a', at);
      await before.append('a', { type: 'user-message', text: 'a cheese slice' }, '2030-01-01T00:00:01.000Z');
      const after = await open(location);
      expect(await after.hasSession('a')).toBe(true);
      expect(await after.after('a', 0)).toEqual([
        { id: 1, at: '2030-01-01T00:00:01.000Z', type: 'user-message', text: 'a cheese slice' },
      ]);
      expect((await after.append('a', { type: 'turn-started' }, '2030-01-01T00:00:02.000Z')).id).toBe(2);
    });

    it('gives 60 concurrent appends to two sessions through two handles the ids 1, 2, 3… of their session, once each', async () => {
      const both = await twoHandles();
      await both[0].createSession('s', at);
      await both[1].createSession('other', at);
      const appended = await Promise.all(
        Array.from({ length: 60 }, (_, index) =>
          (both[index % 2] as ChatStore).append(
            index % 5 === 4 ? 'other' : 's',
            { type: 'user-message', text: `m${index}` },
            at,
          ),
        ),
      );
      const ofS = appended.filter((_, index) => index % 5 !== 4);
      expect(ofS.map((event) => event.id).sort((a, b) => a - b)).toEqual(Array.from({ length: 48 }, (_, i) => i + 1));
      // What each append answered is what a reader finds under that id.
      const stored = await both[1].after('s', 0);
      expect(stored).toEqual([...ofS].sort((a, b) => a.id - b.id));
      expect((await both[0].after('other', 0)).map((event) => event.id)).toEqual([
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
      ]);
    });

    it('lets a reader resume with after(id) through a third handle while appends run through two, never skipping an id', async () => {
      const location = await kind.location();
      const both = [await open(location), await open(location)];
      // Its own handle: a reader queued behind the appends' connections would read only at the end.
      const reader = await open(location);
      await reader.createSession('s', at);
      const total = 150;
      let done = false;
      const appends = Promise.all(
        Array.from({ length: total }, (_, index) =>
          (both[index % 2] as ChatStore).append('s', { type: 'user-message', text: `m${index}` }, at),
        ),
      ).finally(() => {
        done = true;
      });
      const seen: ChatEvent[] = [];
      // Reads while the appends run, resuming from the last id seen, as the live log does after a
      // reconnect. (How many reads overlap the appends is the scheduler's: on a loaded machine the
      // appends can all commit before the first read, so only the ids are asserted.)
      while (!done || seen.length < total) {
        // Whether every append had committed before this read began: a read sent earlier may come
        // back empty after the last commit, and must not end the loop.
        const finished = done;
        const batch = await reader.after('s', seen.at(-1)?.id ?? 0);
        seen.push(...batch);
        if (finished && batch.length === 0) break;
      }
      await appends;
      expect(seen.map((event) => event.id)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    });

    it('binds one of two secrets raced for one session, and one session of two raced for one secret', async () => {
      const both = await twoHandles();
      await both[0].createSession('a', at);
      await both[0].createSession('b', at);
      const forOneSession = await Promise.allSettled([
        both[0].bindSecret('a', 'hash-1'),
        both[1].bindSecret('a', 'hash-2'),
      ]);
      expect(forOneSession.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
      await both[0].createSession('c', at);
      const forOneSecret = await Promise.allSettled([
        both[0].bindSecret('b', 'hash-3'),
        both[1].bindSecret('c', 'hash-3'),
      ]);
      expect(forOneSecret.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
      const owners = await Promise.all(['hash-1', 'hash-2', 'hash-3'].map((hash) => both[1].sessionOfSecret(hash)));
      expect(owners.filter((owner) => owner === 'a')).toHaveLength(1);
      expect(['b', 'c']).toContain(owners[2]);
    });
  });
});

describe.skipIf(!postgresAvailable)('the PostgreSQL chat tables', () => {
  it('refuse an event of no session, an id used twice or below 1, and a counter below 0', async () => {
    const url = await createTestDatabase();
    const store = await implementations.postgres?.open(url);
    await store?.createSession('s', at);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const event = (session: string, id: number) =>
        client.query(`INSERT INTO chat_events (session_id, id, at, type, body) VALUES ($1, $2, 'at', 't', '{}')`, [
          session,
          id,
        ]);
      await expect(event('forged', 1)).rejects.toThrow(/foreign key/);
      await expect(event('s', 0)).rejects.toThrow(/check/);
      await event('s', 1);
      await expect(event('s', 1)).rejects.toThrow(/duplicate key/);
      await expect(client.query(`UPDATE chat_sessions SET last_event_id = -1`)).rejects.toThrow(/check/);
      await expect(
        client.query(`INSERT INTO chat_sessions (session_id, created_at) VALUES ('s', 'again')`),
      ).rejects.toThrow(/duplicate key/);
    } finally {
      await client.end();
    }
  });
});
