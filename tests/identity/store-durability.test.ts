import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openSqliteHouseholdStore } from '../../lib/store';
import type { WriteSet } from './store-child';

/**
 * SPEC §10.10 and §11: identity state lives in the household file, not in a process. One process
 * writes and exits, a new one reads everything back; two processes racing a compare-and-set on the
 * same file (an enrollment code, a sign counter) produce exactly one winner.
 */

const CHILD = 'tests/identity/store-child.ts';
/** A racy check-then-write loses only in a window of microseconds; many cheap rounds give it a chance. */
const ROUNDS = 100;
/** Commands each process fires per round, all in flight together. */
const ATTEMPTS_PER_PROCESS = 4;
const replySchema = z.union([z.object({ result: z.unknown() }), z.object({ error: z.string() })]);

/** A child process, read one stdout line at a time. */
interface Child {
  send(command: unknown): void;
  /** The next line it prints; rejects with its stderr if it exits first. */
  nextLine(): Promise<string>;
  /** Ends stdin, which closes its store, and resolves with its exit code. */
  stop(): Promise<number | null>;
}

function startChild(path: string): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, path]);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    send: (command) => child.stdin.write(`${JSON.stringify(command)}\n`),
    async nextLine() {
      const next = await lines.next();
      if (next.done) throw new Error(`child exited early: ${stderr}`);
      return next.value;
    },
    async stop() {
      child.stdin.end();
      return exited;
    },
  };
}

async function reply(child: Child): Promise<z.infer<typeof replySchema>> {
  return replySchema.parse(JSON.parse(await child.nextLine()));
}

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function freshPath(): string {
  const folder = mkdtempSync(join(tmpdir(), 'household-durability-'));
  folders.push(folder);
  return join(folder, 'household.sqlite');
}

const t0 = 1_750_000_000_000;

const set: WriteSet = {
  records: [
    { kind: 'household', id: 'main', value: '{"adminDid":"did:web:localhost%3A3000"}' },
    { kind: 'did', id: 'did:key:z6MkChild', value: '{"alias":"child"}' },
    { kind: 'key', id: 'key-1', value: '{"type":"Ed25519"}' },
    { kind: 'private-key', id: 'key-1', value: '{"ciphertext":"opaque"}' },
  ],
  passkey: {
    credentialId: 'cred-child',
    role: 'child',
    memberDid: 'did:key:z6MkChild',
    userHandle: 'dXNlcg',
    publicKeyCose: 'pQECAyYgAQ',
    publicKeyJwk: { kty: 'EC', crv: 'P-256', x: 'x', y: 'y' },
    counter: 41,
    transports: ['internal'],
    enrollment: 'eyJ.enrollment',
    createdAt: t0,
  },
  code: { role: 'parent', codeHash: 'parent-code-hash', issuedAt: t0, expiresAt: t0 + 600_000 },
  approval: {
    approvalId: 'approval-1',
    invoiceId: 'urn:uuid:invoice-1',
    invoice: 'eyJ.invoice',
    invoiceHash: 'invoice-hash',
    merchantDid: 'did:key:z6MkShop',
    totalCents: 1500,
    currency: 'USD',
    requiredRoles: ['child', 'parent'],
    approvals: {},
    status: 'pending',
    createdAt: t0,
    expiresAt: t0 + 300_000,
    updatedAt: t0,
  },
  childApproval: 'eyJ.child-approval',
  session: {
    tokenHash: 'session-hash',
    role: 'child',
    memberDid: 'did:key:z6MkChild',
    credentialId: 'cred-child',
    createdAt: t0,
    expiresAt: t0 + 3_600_000,
  },
};

describe('household store across processes', () => {
  it('what one process wrote is read back identical by a new process after it exited', async () => {
    const path = freshPath();
    const writer = startChild(path);
    expect(await writer.nextLine()).toBe('ready');
    writer.send({ op: 'write', set });
    expect(await reply(writer)).toEqual({ result: true });
    expect(await writer.stop()).toBe(0);

    const store = openSqliteHouseholdStore({ path });
    try {
      const { identity } = store;
      for (const record of set.records) {
        expect(await identity.records.get(record.kind, record.id)).toBe(record.value);
      }
      expect(await identity.passkeys.get('cred-child')).toStrictEqual(set.passkey);
      expect(await identity.enrollment.getCode('parent')).toStrictEqual(set.code);
      const pending = { ...set.approval, approvals: { child: set.childApproval } };
      expect(await identity.approvals.get('approval-1')).toStrictEqual(pending);
      expect(await identity.approvals.listPending()).toStrictEqual([pending]);
      expect(await identity.sessions.get('session-hash')).toStrictEqual(set.session);
      // And they are live state, not a snapshot: the code and the counter still work here.
      expect(await identity.enrollment.consumeCode('parent', 'parent-code-hash', t0 + 1)).toBe(true);
      expect(await identity.passkeys.updateCounter('cred-child', 41, 42)).toBe(true);
    } finally {
      store.close();
    }
  });

  it(`two processes racing consumeCode and updateCounter on one file: exactly one wins (${ROUNDS} rounds each)`, async () => {
    const path = freshPath();
    const store = openSqliteHouseholdStore({ path });
    const children = [startChild(path), startChild(path)];
    try {
      // Barrier: both stores are open before either process makes its first attempt.
      expect(await Promise.all(children.map((child) => child.nextLine()))).toEqual(['ready', 'ready']);
      await store.identity.passkeys.add({ ...set.passkey, counter: 0 });

      /** Sends one command to every child ATTEMPTS_PER_PROCESS times at once; returns every reply. */
      async function race(command: unknown): Promise<unknown[]> {
        for (const child of children) for (let i = 0; i < ATTEMPTS_PER_PROCESS; i++) child.send(command);
        const replies = await Promise.all(
          children.map(async (child) => {
            const own: unknown[] = [];
            for (let i = 0; i < ATTEMPTS_PER_PROCESS; i++) own.push(await reply(child));
            return own;
          }),
        );
        return replies.flat();
      }
      const wins = (replies: unknown[]) =>
        replies.filter((entry) => z.object({ result: z.literal(true) }).safeParse(entry).success);
      const losses = (replies: unknown[]) =>
        replies.filter((entry) => z.object({ result: z.literal(false) }).safeParse(entry).success);

      for (let round = 0; round < ROUNDS; round++) {
        const codeHash = `code-${round}`;
        await store.identity.enrollment.replaceCode({ role: 'child', codeHash, issuedAt: t0, expiresAt: t0 + 600_000 });
        const replies = await race({ op: 'consume', role: 'child', codeHash, now: t0 + round });
        expect({ round, wins: wins(replies).length, losses: losses(replies).length }).toEqual({
          round,
          wins: 1,
          losses: 2 * ATTEMPTS_PER_PROCESS - 1,
        });
        expect((await store.identity.enrollment.getCode('child'))?.usedAt).toBe(t0 + round);
      }

      for (let round = 0; round < ROUNDS; round++) {
        const replies = await race({ op: 'counter', credentialId: 'cred-child', expected: round, next: round + 1 });
        expect({ round, wins: wins(replies).length, losses: losses(replies).length }).toEqual({
          round,
          wins: 1,
          losses: 2 * ATTEMPTS_PER_PROCESS - 1,
        });
      }
      expect((await store.identity.passkeys.get('cred-child'))?.counter).toBe(ROUNDS);
    } finally {
      expect(await Promise.all(children.map((child) => child.stop()))).toEqual([0, 0]);
      store.close();
    }
  });
});
