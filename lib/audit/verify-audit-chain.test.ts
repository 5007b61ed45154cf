import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { readHouseholdEnv } from '../env';
import type { HouseholdEvent } from '../events';
import { type OpenIdentity, openIdentity, storeFileName } from '../start-identity';
import { openSqliteHouseholdStore } from '../store';
import { auditCheckpointsFileName, createAuditCheckpoints } from './audit-checkpoints';
import { canonicalJson, genesisHash, hashAuditRow } from './hash-audit-row';
import { verifyAuditChain } from './verify-audit-chain';

const folders: string[] = [];
const opened: OpenIdentity[] = [];
afterEach(() => {
  for (const identity of opened.splice(0)) identity.close();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

interface Fixture {
  readonly identity: OpenIdentity;
  readonly databasePath: string;
  readonly checkpointsPath: string;
  /** Appends `count` events. */
  append(count: number): Promise<void>;
  /** Signs the head now. */
  checkpoint(): Promise<void>;
  /** Signs any claims as the admin would (a checkpoint the code would never write). */
  sign(claims: { rowId: number; hash: string }): Promise<string>;
  verify(options?: { adminJwk?: Record<string, string> }): ReturnType<typeof verifyAuditChain>;
  /** Runs SQL on the file with the triggers dropped, as a tamperer does. */
  tamper(change: (database: Database.Database) => void): void;
}

async function fixture(): Promise<Fixture> {
  const dataDir = mkdtempSync(join(tmpdir(), 'verify-audit-'));
  folders.push(dataDir);
  const identity = await openIdentity(readHouseholdEnv({ EXTENSIBLE_MCP_DATA: dataDir }), {
    store: openSqliteHouseholdStore({ path: join(dataDir, storeFileName) }),
  });
  opened.push(identity);
  const databasePath = join(dataDir, storeFileName);
  const checkpointsPath = join(dataDir, auditCheckpointsFileName);
  const { household } = identity;
  const checkpoints = createAuditCheckpoints({ audit: identity.store.audit, household, path: checkpointsPath });
  let sequence = 0;
  return {
    identity,
    databasePath,
    checkpointsPath,
    async append(count) {
      for (let index = 0; index < count; index += 1) {
        sequence += 1;
        await identity.store.audit.append(event(sequence));
      }
    },
    async checkpoint() {
      await checkpoints.checkpoint();
    },
    sign: (claims) =>
      household.issue({
        signer: 'admin',
        type: 'AuditCheckpoint',
        subject: household.adminDid,
        claims,
        now: new Date(),
      }),
    verify: (options = {}) =>
      verifyAuditChain({
        databasePath,
        checkpointsPath,
        adminDid: household.adminDid,
        adminJwk: options.adminJwk ?? household.adminJwk,
      }),
    tamper(change) {
      const database = new Database(databasePath);
      try {
        database.exec(`DROP TRIGGER IF EXISTS audit_log_append_only_update;
          DROP TRIGGER IF EXISTS audit_log_append_only_delete;
          DROP TRIGGER IF EXISTS audit_log_append_in_order;`);
        change(database);
      } finally {
        database.close();
      }
    },
  };
}

function event(sequence: number): HouseholdEvent {
  return {
    at: '2026-11-30T12:00:00.000Z',
    source: 'proxy',
    kind: 'call-decision',
    outcome: sequence % 2 === 0 ? 'deny' : 'allow',
    message: `decision ${sequence}`,
  };
}

function rowEvent(database: Database.Database, id: number): Record<string, unknown> {
  return JSON.parse((database.prepare('SELECT event FROM audit_log WHERE id = ?').get(id) as { event: string }).event);
}

describe('verifyAuditChain', () => {
  it('passes an empty chain with no checkpoint, and a chain under its checkpoint', async () => {
    const chain = await fixture();
    expect(await chain.verify()).toEqual({ ok: true, rows: 0 });
    await chain.append(5);
    await chain.checkpoint();
    const verdict = await chain.verify();
    expect(verdict).toMatchObject({
      ok: true,
      rows: 5,
      checkpoint: {
        rowId: 5,
        hash: (await chain.identity.store.audit.head()).hash,
        signedBy: chain.identity.household.adminDid,
      },
    });
  });

  it('passes rows appended after the newest checkpoint (the next one will cover them)', async () => {
    const chain = await fixture();
    await chain.append(3);
    await chain.checkpoint();
    await chain.append(2);
    expect(await chain.verify()).toMatchObject({ ok: true, rows: 5, checkpoint: { rowId: 3 } });
  });

  it('names an edited row whose bytes are no longer canonical', async () => {
    const chain = await fixture();
    await chain.append(4);
    await chain.checkpoint();
    chain.tamper((database) =>
      database
        .prepare('UPDATE audit_log SET event = ? WHERE id = 2')
        .run(JSON.stringify(rowEvent(database, 2), null, 1)),
    );
    expect(await chain.verify()).toEqual({
      ok: false,
      rowId: 2,
      reason: "row 2's event is not in canonical form (it was edited)",
    });
  });

  it('names a row whose event is not JSON, or not a household event', async () => {
    const chain = await fixture();
    await chain.append(4);
    await chain.checkpoint();
    chain.tamper((database) => {
      // The derived columns refuse text that is not JSON: the tamperer rebuilds the table without them.
      database.exec(`CREATE TABLE plain AS SELECT id, event, prev_hash, hash FROM audit_log;
        DROP TABLE audit_log; ALTER TABLE plain RENAME TO audit_log;`);
      database.prepare("UPDATE audit_log SET event = 'nothing happened' WHERE id = 3").run();
    });
    expect(await chain.verify()).toMatchObject({
      ok: false,
      rowId: 3,
      reason: "row 3's event is not JSON (it was edited)",
    });
    chain.tamper((database) =>
      database.prepare('UPDATE audit_log SET event = ? WHERE id = 3').run(canonicalJson({ kind: 'nothing' })),
    );
    expect(await chain.verify()).toMatchObject({
      ok: false,
      rowId: 3,
      reason: expect.stringMatching(/not a household event/),
    });
  });

  it('names row 1 when the chain does not start at the genesis value', async () => {
    const chain = await fixture();
    await chain.append(2);
    await chain.checkpoint();
    chain.tamper((database) => {
      const prevHash = 'f'.repeat(64);
      const hash = hashAuditRow({ id: 1, prevHash, event: rowEvent(database, 1) });
      database.prepare('UPDATE audit_log SET prev_hash = ?, hash = ? WHERE id = 1').run(prevHash, hash);
    });
    expect(await chain.verify()).toMatchObject({ ok: false, rowId: 1, reason: expect.stringMatching(/genesis/) });
  });

  it('names the earliest checkpoint that disagrees with a chain rewritten after an edit', async () => {
    const chain = await fixture();
    await chain.append(3);
    await chain.checkpoint();
    await chain.append(3);
    await chain.checkpoint();
    chain.tamper((database) => {
      // Row 2 edited, then every later row relinked and rehashed: consistent in itself.
      let prevHash = (database.prepare('SELECT hash FROM audit_log WHERE id = 1').get() as { hash: string }).hash;
      for (let id = 2; id <= 6; id += 1) {
        const edited = id === 2 ? { ...rowEvent(database, id), outcome: 'allow' } : rowEvent(database, id);
        const hash = hashAuditRow({ id, prevHash, event: edited });
        database
          .prepare('UPDATE audit_log SET event = ?, prev_hash = ?, hash = ? WHERE id = ?')
          .run(canonicalJson(edited), prevHash, hash, id);
        prevHash = hash;
      }
    });
    expect(await chain.verify()).toMatchObject({
      ok: false,
      rowId: 3,
      reason: expect.stringMatching(/^row 3's hash is not the one the household admin signed .* rewritten$/),
    });
  });

  it('refuses every checkpoint against another admin key', async () => {
    const chain = await fixture();
    await chain.append(2);
    await chain.checkpoint();
    const other = await fixture();
    expect(await chain.verify({ adminJwk: other.identity.household.adminJwk })).toMatchObject({
      ok: false,
      rowId: 2,
      reason: expect.stringMatching(/^the checkpoint on line 1 .* is not signed by the household admin/),
    });
  });

  it('refuses a line whose plain fields disagree with what is signed, and a line that is no checkpoint', async () => {
    const chain = await fixture();
    await chain.append(3);
    const credential = await chain.sign({ rowId: 3, hash: (await chain.identity.store.audit.head()).hash });
    writeFileSync(chain.checkpointsPath, `${JSON.stringify({ rowId: 9, hash: genesisHash, credential })}\n`);
    expect(await chain.verify()).toMatchObject({
      ok: false,
      rowId: 9,
      reason: 'the checkpoint on line 1 of the checkpoints file says row 9, but its signature covers row 3',
    });
    writeFileSync(chain.checkpointsPath, 'not a checkpoint\n');
    expect(await chain.verify()).toMatchObject({ ok: false, reason: expect.stringMatching(/is not a checkpoint/) });
  });

  it('refuses two admin-signed checkpoints that disagree on one row, and a row-0 checkpoint off the genesis value', async () => {
    const chain = await fixture();
    await chain.append(2);
    await chain.checkpoint();
    const conflicting = await chain.sign({ rowId: 2, hash: 'a'.repeat(64) });
    appendFileSync(
      chain.checkpointsPath,
      `${JSON.stringify({ rowId: 2, hash: 'a'.repeat(64), credential: conflicting })}\n`,
    );
    expect(await chain.verify()).toMatchObject({
      ok: false,
      rowId: 2,
      reason: expect.stringMatching(/disagree on row 2/),
    });

    const fresh = await fixture();
    const zero = await fresh.sign({ rowId: 0, hash: 'b'.repeat(64) });
    writeFileSync(fresh.checkpointsPath, `${JSON.stringify({ rowId: 0, hash: 'b'.repeat(64), credential: zero })}\n`);
    expect(await fresh.verify()).toMatchObject({ ok: false, rowId: 0, reason: expect.stringMatching(/genesis/) });
  });

  it('names row 1 when the audit table was dropped', async () => {
    const chain = await fixture();
    await chain.append(1);
    await chain.checkpoint();
    chain.tamper((database) => database.exec('DROP TABLE audit_log'));
    expect(await chain.verify()).toMatchObject({
      ok: false,
      rowId: 1,
      reason: expect.stringMatching(/no audit table/),
    });
  });
});
