import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createChatService } from '../../lib/agent/create-chat-service';
import type { ChatService } from '../../lib/agent/types';
import { countingMockRail, startTestHousehold, type TestHousehold } from '../payments/household';
import { is, readTranscript } from './chat-household';

// SPEC §11, §10.10 (docs/scale-out.md, turn leases): a chat turn is owned through a lease in the
// household's store. Its instance is killed (kill -9) in the middle of an order; another instance
// on the same store takes the turn over once the lease expired and finishes the order in the same
// chat, charging exactly once, whether the first one died before the charge or between the rail's
// answer and the receipt.
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

/** Runs the dying instance to its death; resolves with the chat session it left mid-order. */
function dyingInstance(dataDir: string, when: 'approved' | 'charged'): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'tests/agent/fixtures/dying-chat.ts', dataDir, when, String(leaseMs)],
      { cwd: root, env: { PATH: process.env.PATH ?? '' } },
      (error, stdout, stderr) => {
        if (error?.signal !== 'SIGKILL')
          return reject(new Error(`the instance did not die: ${error?.message}\n${stderr}`));
        resolve(String(JSON.parse(stdout.trim().split('\n')[0] ?? '{}').sessionId));
      },
    );
  });
}

/** Rows of a table in the household file, read as an operator would. */
function count(dataDir: string, sql: string): unknown {
  const database = new Database(join(dataDir, 'household.sqlite'), { readonly: true });
  try {
    return database.prepare(sql).get();
  } finally {
    database.close();
  }
}

describe.each(['approved', 'charged'] as const)('an instance killed mid-order (%s)', (when) => {
  it('is succeeded by another that finishes the order in the same chat, charging once', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'turn-takeover-'));
    folders.push(dataDir);
    const sessionId = await dyingInstance(dataDir, when);

    household = await startTestHousehold({ dataDir, enrol: false });
    const { runtime } = household;
    const lease = count(dataDir, 'SELECT owner, resume FROM turn_leases') as { resume: string };
    expect(JSON.parse(lease.resume)).toMatchObject({ kind: 'order' });
    chat = createChatService({
      runtime,
      store: runtime.identity.store.chat,
      leases: runtime.identity.store.turnLeases,
      turnLeaseMs: leaseMs,
    });
    const transcript = readTranscript(chat, sessionId);
    const delivered = await transcript.waitFor(
      (event): event is Extract<typeof event, { type: 'receipt' }> =>
        event.type === 'receipt' && typeof event.etaMinutes === 'number',
    );
    const ended = await transcript.waitFor(is.turnEnded);
    transcript.stop();

    expect(delivered).toMatchObject({ amountCents: 1500 });
    expect(ended.reason).toBe('done');
    const said = transcript.text();
    expect(said).toContain('Picking up the order of $15.00 where the agent left off.');
    expect(said).toContain('The shop signed its commitment to deliver to 12 Main St');
    // The dead instance's turn never ended on its own: one end, the successor's.
    expect(transcript.events.filter((event) => event.type === 'turn-ended')).toHaveLength(1);
    expect(count(dataDir, 'SELECT COUNT(*) AS n FROM mock_rail_charges')).toEqual({ n: 1 });
    expect(count(dataDir, "SELECT COUNT(*) AS n FROM payments WHERE state = 'succeeded'")).toEqual({ n: 1 });
    const approval = await runtime.identity.store.identity.approvals.getByInvoice(delivered.invoiceId);
    expect(approval?.status).toBe('fulfilled');
    // Nothing is left for a third instance to take over.
    expect(count(dataDir, 'SELECT COUNT(*) AS n FROM turn_leases')).toEqual({ n: 0 });
  }, 180_000);
});

describe('an instance whose lease another took over', () => {
  it('stops its turn, and the one holding the lease finishes the order once', async () => {
    const { rail, charges } = countingMockRail();
    household = await startTestHousehold({ rail });
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
      // Read where the turn goes on: another instance's rows reach a reader only once it reads again
      // (live chat across instances is the store's notifications, next in docs/scale-out.md).
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
