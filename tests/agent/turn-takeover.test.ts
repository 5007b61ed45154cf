import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createChatService } from '../../lib/agent/create-chat-service';
import type { ChatService } from '../../lib/agent/types';
import { countingMockRail, startTestHousehold, type TestHousehold } from '../payments/household';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';
import { is, readTranscript } from './chat-household';

// SPEC §11, §10.10 (docs/scale-out.md, turn leases): a chat turn is owned through a lease in the
// household's store. Its instance is killed (kill -9) in the middle of an order; another instance
// on the same store takes the turn over once the lease expired and finishes the order in the same
// chat, charging exactly once, whether the first one died before the charge, while the charge's
// policy decided (its single-use evidence reserved under a lease, nothing sent), or between the
// rail's answer and the receipt. Each case runs on the shared SQLite file and on PostgreSQL (`DATABASE_URL`).
const root = fileURLToPath(new URL('../..', import.meta.url));
const leaseMs = 600;
// Two household starts (the dying one and its successor), each a few seconds on a loaded 2-core machine.
const folders: string[] = [];
let household: TestHousehold | undefined;
let chat: ChatService | undefined;
afterEach(async () => {
  await chat?.close();
  await household?.close();
  chat = undefined;
  household = undefined;
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

/** Where the household lives: its data folder, and the PostgreSQL database when there is one. */
interface Place {
  readonly dataDir: string;
  readonly url?: string;
}

/** The stores each case runs on: the household's SQLite file, and PostgreSQL when this run has it. */
const stores: Record<string, () => Promise<string | undefined>> = {
  sqlite: async () => undefined,
  ...(postgresAvailable && { postgres: createTestDatabase }),
};

/** The household environment of a place: `DATABASE_URL` on PostgreSQL. */
const envOf = (place: Place): Record<string, string> => (place.url === undefined ? {} : { DATABASE_URL: place.url });

/** Runs the dying instance to its death; resolves with the chat session it left mid-order. */
function dyingInstance(place: Place, when: 'approved' | 'deciding' | 'charged'): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'tests/agent/fixtures/dying-chat.ts', place.dataDir, when, String(leaseMs)],
      { cwd: root, env: { PATH: process.env.PATH ?? '', ...envOf(place) } },
      (error, stdout, stderr) => {
        if (error?.signal !== 'SIGKILL')
          return reject(new Error(`the instance did not die: ${error?.message}\n${stderr}`));
        resolve(String(JSON.parse(stdout.trim().split('\n')[0] ?? '{}').sessionId));
      },
    );
  });
}

/** The first row of a query on the household's store, read as an operator would. */
async function row(place: Place, sql: string): Promise<unknown> {
  if (place.url !== undefined) {
    const client = new pg.Client({ connectionString: place.url });
    await client.connect();
    try {
      return (await client.query(sql)).rows[0];
    } finally {
      await client.end();
    }
  }
  const database = new Database(join(place.dataDir, 'household.sqlite'), { readonly: true });
  try {
    return database.prepare(sql).get();
  } finally {
    database.close();
  }
}

/** How many rows a query counts (`SELECT COUNT(*) AS n …`), on either store. */
const count = async (place: Place, sql: string) => Number(((await row(place, sql)) as { n: unknown }).n);

it.skipIf(postgresAvailable)(`the takeover on PostgreSQL is skipped: ${postgresUnavailable}`, () => {});

describe.each(
  Object.entries(stores).flatMap(([store, database]) =>
    (['approved', 'deciding', 'charged'] as const).map((when) => ({ store, database, when })),
  ),
)('an instance killed mid-order ($when, on $store)', ({ database, when }) => {
  it('is succeeded by another that finishes the order in the same chat, charging once', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'turn-takeover-'));
    folders.push(dataDir);
    const url = await database();
    const place: Place = { dataDir, ...(url === undefined ? {} : { url }) };
    const sessionId = await dyingInstance(place, when);

    household = await startTestHousehold({ dataDir, enrol: false, env: envOf(place) });
    const { runtime } = household;
    const lease = (await row(place, 'SELECT owner, resume FROM turn_leases')) as { resume: string };
    expect(JSON.parse(lease.resume)).toMatchObject({ kind: 'order' });
    chat = createChatService({
      runtime,
      store: runtime.identity.store.chat,
      leases: runtime.identity.store.turnLeases,
      turnLeaseMs: leaseMs,
    });
    const transcript = readTranscript(chat, sessionId);
    // The successor's turn ends either way; what it said is the failure's reason when no receipt came.
    const ended = await transcript.waitFor(is.turnEnded);
    transcript.stop();
    const said = transcript.text();
    const delivered = transcript.events.find(
      (event): event is Extract<typeof event, { type: 'receipt' }> =>
        event.type === 'receipt' && typeof event.etaMinutes === 'number',
    );
    expect(delivered, said).toMatchObject({ amountCents: 1500 });
    expect(ended.reason).toBe('done');
    expect(said).toContain('Picking up the order of $15.00 where the agent left off.');
    expect(said).toContain('The shop signed its commitment to deliver to 12 Main St');
    // The dead instance's turn never ended on its own: one end, the successor's.
    expect(transcript.events.filter((event) => event.type === 'turn-ended')).toHaveLength(1);
    expect(await count(place, 'SELECT COUNT(*) AS n FROM mock_rail_charges')).toBe(1);
    expect(await count(place, "SELECT COUNT(*) AS n FROM payments WHERE state = 'succeeded'")).toBe(1);
    const approval = await runtime.identity.store.identity.approvals.getByInvoice(String(delivered?.invoiceId));
    expect(approval?.status).toBe('fulfilled');
    // Nothing is left for a third instance to take over.
    expect(await count(place, 'SELECT COUNT(*) AS n FROM turn_leases')).toBe(0);
    // On PostgreSQL the data folder holds no household file: everything was in the database.
    if (url !== undefined) expect(existsSync(join(dataDir, 'household.sqlite'))).toBe(false);
    // The dead instance held the checkpoint lease and left rows it never signed: once its lease
    // showed it stopped, the successor said so in the chain, once (docs/scale-out.md).
    await chat.close();
    chat = undefined;
    await household.close();
    household = undefined;
    expect(await count(place, "SELECT COUNT(*) AS n FROM audit_log WHERE kind = 'audit-tail-unvouched'")).toBe(1);
  }, 180_000);
});

describe.each(Object.entries(stores))('an instance whose lease another took over (on %s)', (_store, database) => {
  it('stops its turn, and the one holding the lease finishes the order once', async () => {
    const { rail, charges } = countingMockRail();
    const url = await database();
    household = await startTestHousehold({ rail, env: url === undefined ? {} : { DATABASE_URL: url } });
    const { runtime, members } = household;
    const on = (clock?: () => Date) =>
      createChatService({
        runtime,
        store: runtime.identity.store.chat,
        leases: runtime.identity.store.turnLeases,
        turnLeaseMs: leaseMs,
        ...(clock === undefined ? {} : { clock }),
      });
    const first = on();
    // The second instance's clock is an hour ahead: to it the first one's lease has always expired,
    // as a lease looks once its holder stalled past it.
    chat = on(() => new Date(Date.now() + 3_600_000));
    try {
      const { sessionId } = await first.createSession();
      expect((await first.send(sessionId, 'a large pepperoni to 12 Main St')).accepted).toBe(true);
      // Read where the turn goes on: on SQLite, another instance's rows reach a reader only once it
      // reads again (PostgreSQL notifies them: tests/agent/chat-across-instances.test.ts).
      const transcript = readTranscript(chat, sessionId);
      await transcript.waitFor((event) => event.type === 'assistant-text' && event.delta.startsWith('Picking up'));
      const { approvalId } = await transcript.waitFor(is.approval('pending'));
      // The first instance learns at its next renewal that the lease is gone, and its turn stops.
      expect((await first.send(sessionId, 'the menu please')).accepted).toBe(false);
      for (const role of ['child', 'parent'] as const) {
        const member = members[role];
        const started = await runtime.identity.passkeys.approval.options({ session: member.session, approvalId });
        if (!started.ok) throw new Error(started.reason);
        await runtime.identity.passkeys.approval.verify({
          session: member.session,
          ceremonyId: started.ceremonyId,
          response: member.authenticator.assert(started.options),
        });
      }
      await transcript.waitFor((event) => event.type === 'receipt' && typeof event.etaMinutes === 'number');
      await transcript.waitFor(is.turnEnded);
      transcript.stop();
      expect(charges).toHaveLength(1);
      expect(transcript.events.filter((event) => event.type === 'turn-ended')).toHaveLength(1);
      expect(transcript.events.filter((event) => event.type === 'error')).toEqual([]);
    } finally {
      await first.close();
    }
  }, 180_000);
});
