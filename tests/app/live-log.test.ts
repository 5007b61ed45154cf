import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GET as stream } from '../../app/api/log/stream/route';
import type { HouseholdEvent } from '../../lib/events';
import { type HouseholdStore, openSqliteHouseholdStore, setHouseholdApp } from '../../lib/index';
import { createFakeApp, createFakeChat, readEvents, request } from './fake-chat';

// The live log (SPEC §8) over a real audit table: backlog, live rows, filters, and a reconnect
// that resumes after `Last-Event-ID` with nothing lost and nothing twice.
type Row = HouseholdEvent & { id: number; hash: string };

let folder: string;
let store: HouseholdStore;
beforeEach(async () => {
  folder = await mkdtemp(join(tmpdir(), 'live-log-'));
  store = openSqliteHouseholdStore({ path: join(folder, 'household.sqlite') });
  setHouseholdApp({ ...createFakeApp(createFakeChat()), log: store.audit });
});
afterEach(async () => {
  setHouseholdApp(undefined);
  store.close();
  await rm(folder, { recursive: true, force: true });
});

let counter = 0;
async function append(overrides: Partial<HouseholdEvent> = {}) {
  counter += 1;
  return store.audit.append({
    at: new Date().toISOString(),
    source: 'proxy',
    kind: 'call-decision',
    outcome: 'allow',
    session: 'session-a',
    message: `event ${counter}`,
    ...overrides,
  });
}

const get = (path: string, headers: Record<string, string> = {}) =>
  stream(request(path, { method: 'GET', origin: null, headers }));

describe('GET /api/log/stream', () => {
  it('sends the stored rows, then live ones, each with its row id and hash', async () => {
    const first = await append();
    await append({ outcome: 'deny', message: 'refused' });
    const response = await get('/api/log/stream');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const reading = readEvents<Row>(response, (seen) => seen.length >= 3);
    const live = await append({ kind: 'receipt-issued', source: 'payments', outcome: 'ok' });
    const rows = await reading;
    expect(rows.map(({ id }) => Number(id))).toEqual([first.id, first.id + 1, live.id]);
    expect(rows[1]?.data).toMatchObject({ id: first.id + 1, outcome: 'deny', message: 'refused' });
    expect(rows[2]?.data.hash).toBe(live.hash);
  });

  it('never shows the raw MCP session id of a row written before events named a scope digest', async () => {
    // Issue 26 item 13: such rows served the id, and whoever held /mcp's token could join that session.
    const raw = '0b9a1c3e-5d2f-4a6b-8c7d-9e0f1a2b3c4d';
    await append({ session: raw, message: 'an old /mcp decision' });
    const rows = await readEvents<Row>(await get('/api/log/stream'), (seen) => seen.length >= 1);
    const shown = rows[0]?.data.session;
    expect(shown).toMatch(/^legacy-[A-Za-z0-9_-]{16}$/);
    expect(JSON.stringify(rows)).not.toContain(raw);
    const filtered = await readEvents<Row>(await get(`/api/log/stream?session=${shown}`), (seen) => seen.length >= 1);
    expect(filtered[0]?.data.message).toBe('an old /mcp decision');
    const byRaw = await get(`/api/log/stream?session=${raw}`);
    expect(byRaw.status).toBe(200);
  });

  it('resumes after Last-Event-ID with every row exactly once while rows keep arriving', async () => {
    for (let index = 0; index < 1200; index += 1) await append();
    // A reconnect after row 3: catching up takes several pages, and a writer keeps appending until
    // the reader is live, so rows land in pages still to read, in the page being sent, and in the
    // live queue.
    const response = await get('/api/log/stream', { 'last-event-id': '3' });
    let received = 0;
    let lastId = Number.POSITIVE_INFINITY;
    const reading = readEvents<Row>(response, (seen) => {
      received = seen.length;
      return Number(seen.at(-1)?.id ?? 0) >= lastId;
    });
    while (received < 1500) {
      await append();
      await new Promise((resolve) => setImmediate(resolve));
    }
    lastId = (await append()).id;
    await append();
    const ids = (await reading).map(({ id }) => Number(id));
    expect(ids).toEqual(Array.from({ length: lastId - 3 }, (_, index) => index + 4));
  });

  it('filters by session, order, kind and outcome, live rows included', async () => {
    await append({ session: 'session-b', orderId: 'urn:uuid:1', kind: 'policy-decision', outcome: 'deny' });
    await append({ session: 'session-b', orderId: 'urn:uuid:1', kind: 'policy-decision', outcome: 'allow' });
    await append({ session: 'session-b', orderId: 'urn:uuid:2', kind: 'policy-decision', outcome: 'deny' });
    await append({ session: 'session-a', orderId: 'urn:uuid:1', kind: 'policy-decision', outcome: 'deny' });
    const response = await get('/api/log/stream?session=session-b&order=urn:uuid:1&kind=policy-decision&outcome=deny');
    const reading = readEvents<Row>(response, (seen) => seen.length >= 2);
    await append({ session: 'session-b', orderId: 'urn:uuid:1', kind: 'evidence-refused', outcome: 'deny' });
    const match = await append({
      session: 'session-b',
      orderId: 'urn:uuid:1',
      kind: 'policy-decision',
      outcome: 'deny',
    });
    const rows = await reading;
    expect(rows.map(({ id }) => Number(id))).toEqual([1, match.id]);
  });

  it('a first connection starts from the most recent rows, not the whole table', async () => {
    for (let index = 0; index < 520; index += 1) await append();
    const rows = await readEvents<Row>(await get('/api/log/stream'), (seen) => seen.length >= 500);
    expect(Number(rows[0]?.id)).toBe(21);
  });

  it.each([
    ['a Last-Event-ID that is no row id', '/api/log/stream', { 'last-event-id': 'x' }, 'Last-Event-ID'],
    ['an unknown outcome', '/api/log/stream?outcome=maybe', {}, 'invalid log filter: outcome'],
    ['a kind that is no event kind', '/api/log/stream?kind=%3Cscript%3E', {}, 'invalid log filter: kind'],
    ['an oversized session', `/api/log/stream?session=${'s'.repeat(201)}`, {}, 'invalid log filter: session'],
  ])('refuses %s with a 400 in words', async (_name, path, headers, message) => {
    const response = await get(path, headers);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: string }).error).toContain(message);
  });
});
