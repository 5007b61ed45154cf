import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createCredentialVerifier, householdKeys, type IssueRequest } from '../../identity/index';
import { readHouseholdEnv } from '../env';
import type { HouseholdEvent } from '../events';
import { type OpenIdentity, openIdentity, storeFileName } from '../start-identity';
import { openSqliteHouseholdStore } from '../store';
import { auditCheckpointsFileName, createAuditCheckpoints } from './audit-checkpoints';

const folders: string[] = [];
const opened: OpenIdentity[] = [];
afterEach(() => {
  for (const identity of opened.splice(0)) identity.close();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

async function household(): Promise<{ identity: OpenIdentity; path: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'audit-checkpoints-'));
  folders.push(dataDir);
  const identity = await openIdentity(readHouseholdEnv({ EXTENSIBLE_MCP_DATA: dataDir }), {
    store: openSqliteHouseholdStore({ path: join(dataDir, storeFileName) }),
  });
  opened.push(identity);
  return { identity, path: join(dataDir, auditCheckpointsFileName) };
}

const event: HouseholdEvent = {
  at: '2026-11-30T12:00:00.000Z',
  source: 'runtime',
  kind: 'merchant-pinned',
  outcome: 'ok',
  message: 'pinned the shop',
};

function lines(path: string): Array<{ rowId: number; hash: string; credential: string }> {
  return readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { rowId: number; hash: string; credential: string });
}

/** A promise and its resolver: the test decides when signing may finish. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

describe('audit checkpoints', () => {
  it('signs the head every N rows and at close, as admin-signed AuditCheckpoint credentials', async () => {
    const { identity, path } = await household();
    const { audit } = identity.store;
    const checkpoints = createAuditCheckpoints({ audit, household: identity.household, path, every: 3 });
    for (let index = 0; index < 7; index += 1) await audit.append(event);
    await checkpoints.close();
    const written = lines(path);
    expect(written.map((line) => line.rowId)).toEqual([3, 6, 7]);
    const rows = await audit.after(0);
    const verify = createCredentialVerifier(householdKeys(identity.household));
    for (const line of written) {
      expect(line.hash).toBe(rows[line.rowId - 1]?.hash);
      const verdict = await verify(line.credential, {
        type: 'AuditCheckpoint',
        issuer: identity.household.adminDid,
        now: new Date(),
      });
      expect(verdict.verified).toBe(true);
      if (verdict.verified) {
        expect(verdict.credential.subject).toMatchObject({ rowId: line.rowId, hash: line.hash });
        expect(verdict.credential.sub).toBe(identity.household.adminDid);
      }
    }
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('covers the head at the moment it was requested, while appends go on during signing', async () => {
    const { identity, path } = await household();
    const { audit } = identity.store;
    const signing = gate();
    const slow = {
      adminDid: identity.household.adminDid,
      adminJwk: identity.household.adminJwk,
      issue: async (request: IssueRequest) => {
        await signing.promise;
        return identity.household.issue(request);
      },
    };
    const checkpoints = createAuditCheckpoints({ audit, household: slow, path });
    await audit.append(event);
    const second = await audit.append(event);
    const requested = checkpoints.checkpoint();
    // Appends are not held up by the pending signature.
    await audit.append(event);
    await audit.append(event);
    expect((await audit.head()).rowId).toBe(4);
    signing.open();
    expect(await requested).toMatchObject({ rowId: 2, hash: second.hash });
    await checkpoints.close();
    expect(lines(path).map((line) => line.rowId)).toEqual([2, 4]);
  });

  it('reports a failed checkpoint, loses no row, and signs the next one', async () => {
    const { identity, path } = await household();
    const { audit } = identity.store;
    const errors: Error[] = [];
    let fail = true;
    const flaky = {
      adminDid: identity.household.adminDid,
      adminJwk: identity.household.adminJwk,
      issue: async (request: IssueRequest) => {
        if (fail) throw new Error('the key store is locked');
        return identity.household.issue(request);
      },
    };
    const checkpoints = createAuditCheckpoints({
      audit,
      household: flaky,
      path,
      onError: (error) => errors.push(error),
    });
    await audit.append(event);
    expect(await checkpoints.checkpoint()).toBeUndefined();
    expect(errors.map((error) => error.message)).toEqual(['audit checkpoint at row 1 not written']);
    expect((await audit.head()).rowId).toBe(1);
    fail = false;
    await audit.append(event);
    await checkpoints.close();
    expect(lines(path).map((line) => line.rowId)).toEqual([2]);
  });

  it('writes one line for one head, keeps an existing file owner-only, and nothing after close', async () => {
    const { identity, path } = await household();
    const { audit } = identity.store;
    writeFileSync(path, '');
    chmodSync(path, 0o644);
    const checkpoints = createAuditCheckpoints({ audit, household: identity.household, path });
    await audit.append(event);
    await checkpoints.checkpoint();
    await checkpoints.checkpoint();
    await checkpoints.close();
    await audit.append(event);
    expect(await checkpoints.checkpoint()).toBeUndefined();
    expect(lines(path).map((line) => line.rowId)).toEqual([1]);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('refuses an interval that is not a positive integer', async () => {
    const { identity, path } = await household();
    const options = { audit: identity.store.audit, household: identity.household, path };
    expect(() => createAuditCheckpoints({ ...options, every: 0 })).toThrow(RangeError);
    expect(() => createAuditCheckpoints({ ...options, every: 1.5 })).toThrow(RangeError);
  });
});

describe('audit checkpoints over a verified chain only', () => {
  it('refuses to sign when a witness holds a checkpoint beyond the table, and says why', async () => {
    const { identity, path } = await household();
    const { audit } = identity.store;
    for (let index = 0; index < 4; index += 1) await audit.append(event);
    const head = await audit.head();
    const credential = await identity.household.issue({
      signer: 'admin',
      type: 'AuditCheckpoint',
      subject: identity.household.adminDid,
      claims: { rowId: 9, hash: 'a'.repeat(64) },
      now: new Date(),
    });
    const ahead = {
      name: 'test witness',
      submit: async () => ({ accepted: true as const }),
      latest: async () => ({ householdDid: identity.household.adminDid, rowId: 9, hash: 'a'.repeat(64), credential }),
      close: async () => undefined,
    };
    const reports: string[] = [];
    const checkpoints = createAuditCheckpoints({
      audit,
      household: identity.household,
      path,
      witnesses: [ahead],
      report: (report) => reports.push(`${report.kind}: ${report.message}`),
    });
    expect(await checkpoints.checkpoint()).toBeUndefined();
    await checkpoints.close();
    expect(checkpoints.refused()).toMatchObject({ rowId: head.rowId + 1 });
    expect(reports).toEqual([
      expect.stringMatching(
        /^audit-checkpoint-refused: .* rows 5 to 9 are missing: the table ends at row 4, but the witness test witness holds a checkpoint at row 9 .*rolled back/,
      ),
    ]);
    expect(() => readFileSync(path, 'utf8')).toThrow();
  });

  it('refuses a newest stored checkpoint the admin did not sign', async () => {
    const { identity, path } = await household();
    const { audit } = identity.store;
    await audit.append(event);
    writeFileSync(
      path,
      `${JSON.stringify({ rowId: 1, hash: (await audit.head()).hash, credential: 'e30.e30.c2ln' })}\n`,
    );
    const checkpoints = createAuditCheckpoints({ audit, household: identity.household, path });
    expect(await checkpoints.checkpoint()).toBeUndefined();
    await checkpoints.close();
    expect(checkpoints.refused()?.reason).toContain(
      'the newest checkpoint in the checkpoint store is not signed by the household admin',
    );
    expect(lines(path)).toHaveLength(1);
  });

  it('hands each checkpoint to the witnesses, and reports one that refuses', async () => {
    const { identity, path } = await household();
    const { audit } = identity.store;
    const submitted: number[] = [];
    const refusing = {
      name: 'refusing',
      submit: async (checkpoint: { rowId: number }) => {
        submitted.push(checkpoint.rowId);
        return { accepted: false as const, reason: 'it holds row 99' };
      },
      latest: async () => undefined,
      close: async () => undefined,
    };
    const reports: string[] = [];
    const checkpoints = createAuditCheckpoints({
      audit,
      household: identity.household,
      path,
      every: 2,
      witnesses: [refusing],
      report: (report) => reports.push(report.kind),
    });
    await audit.append(event);
    await audit.append(event);
    await checkpoints.close();
    expect(submitted[0]).toBe(2);
    expect(reports[0]).toBe('audit-witness-refused');
  });
});
