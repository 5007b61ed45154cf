/**
 * Live chat across instances (issue 28, docs/scale-out.md): two handles on one PostgreSQL
 * database stand in for two app instances. A page streaming from instance B sees the events
 * instance A appends without reading again, in id order, each once, also while both append to one
 * session at once and while B's listener connection is killed (`pg_terminate_backend`).
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChatLog } from '../../lib/agent/chat-log';
import { createChatLog } from '../../lib/agent/chat-log';
import {
  chatChannel,
  createPostgresChatStore,
  type PostgresChatStoreOptions,
  postgresChatMigrations,
} from '../../lib/agent/postgres-chat-store';
import type { ChatEvent } from '../../lib/agent/types';
import { openPostgresPool } from '../../proxy/index';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

/** One instance's chat log on the database: its own pool, store and listener. */
async function instance(url: string, options: PostgresChatStoreOptions = {}): Promise<ChatLog> {
  const pool = await openPostgresPool({ url, migrations: { chat: postgresChatMigrations }, what: 'chat store' });
  closers.push(() => pool.end());
  const store = createPostgresChatStore(pool, options);
  await store.createSession('s', '2030-01-01T00:00:00.000Z');
  return createChatLog(store);
}

/** Reads the session on `log` until `count` events arrived; `ids` resolves with their ids. */
function read(log: ChatLog, count: number): { ids: Promise<number[]>; stop: () => void } {
  const controller = new AbortController();
  closers.push(async () => controller.abort());
  const ids = (async () => {
    const seen: number[] = [];
    for await (const event of log.events('s', { afterId: 0, signal: controller.signal })) {
      seen.push((event as ChatEvent).id);
      if (seen.length === count) break;
    }
    return seen;
  })();
  return { ids, stop: () => controller.abort() };
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, index) => from + index);
const message = (text: string) => ({ type: 'user-message', text }) as const;

it.skipIf(postgresAvailable)(`live chat across instances is skipped: ${postgresUnavailable}`, () => {});

describe.skipIf(!postgresAvailable)('live chat across two instances on one PostgreSQL database', () => {
  it('streams on instance B every event instance A appends, in order, once, without a re-read by the page', async () => {
    const url = await createTestDatabase();
    const a = await instance(url);
    const b = await instance(url);
    await a.append('s', message('before the page opened'));
    const onB = read(b, 30);
    for (const index of range(2, 30)) await a.append('s', message(`from A ${index}`));
    expect(await onB.ids).toEqual(range(1, 30));
  });

  it('gives readers on both instances ids 1 to 80 once each while both instances append to one session at once', async () => {
    const url = await createTestDatabase();
    const a = await instance(url);
    const b = await instance(url);
    const onA = read(a, 80);
    const onB = read(b, 80);
    const appended = await Promise.all(
      range(1, 80).map((index) => (index % 2 === 0 ? a : b).append('s', message(`${index}`))),
    );
    // The session's row lock hands out every id once, through either instance.
    expect(appended.map((event) => event.id).sort((x, y) => x - y)).toEqual(range(1, 80));
    expect(await onA.ids).toEqual(range(1, 80));
    expect(await onB.ids).toEqual(range(1, 80));
  });

  it("sees every event exactly once, without a gap, when B's listener connection is killed while A appends", async () => {
    const url = await createTestDatabase();
    const a = await instance(url);
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
    // A slow first reconnect, so the events appended while it is down are not announced to it.
    const b = await instance(url, {
      reconnect: { first: 2000, max: 4000 },
      onListener: (state) => {
        states.push(state);
        changed();
      },
    });
    const onB = read(b, 120);
    await next('listening');
    for (const index of range(1, 60)) await a.append('s', message(`${index}`));
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    closers.push(() => admin.end());
    const listeners = await admin.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = $1',
      [`LISTEN ${chatChannel}`],
    );
    expect(listeners.rows).toHaveLength(1);
    await admin.query('SELECT pg_terminate_backend($1)', [listeners.rows[0]?.pid]);
    await next('lost');
    for (const index of range(61, 120)) await a.append('s', message(`${index}`));
    await next('listening');
    expect(await onB.ids).toEqual(range(1, 120));
  });
});
