import { execFile } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVeramoVerifier, type DidDocument, openHousehold } from '../../identity/index';
import { auditCheckpointsFileName } from '../../lib/audit/audit-checkpoints';
import { verifyAuditChain } from '../../lib/audit/verify-audit-chain';
import type { HouseholdEvent } from '../../lib/events';
import { openSqliteHouseholdStore } from '../../lib/store';
import { startTestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';
import {
  copyDataFolder,
  countRows,
  deleteRow,
  deleteTail,
  editAndRecompute,
  editRow,
  swapRows,
  tamperWith,
} from './tamper';

// SPEC §8, issue 15: a real household runs one whole order and stops; `npm run audit:verify`
// (the real script, spawned) verifies its audit chain, and names the row when a tamperer with the
// SQLite file (triggers dropped) edits, deletes or reorders rows, deletes the tail, or rewrites the
// chain after an edit; a checkpoint with a forged signature or another key is refused.
const root = fileURLToPath(new URL('../..', import.meta.url));
const folders: string[] = [];
let dataDir = '';
let adminDocument: DidDocument;
let rows = 0;
/** Every event the runtime's bus fanned out, in order. */
const busEvents: HouseholdEvent[] = [];
/** Rows in the table while the household was running, read through `runtime.audit`. */
let rowsWhileRunning = 0;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'audit-run-'));
  folders.push(dataDir);
  const household = await startTestHousehold({ dataDir, onEvent: (event) => busEvents.push(event) });
  try {
    const { runtime } = household;
    adminDocument = runtime.identity.household.adminDocument;
    const { invoice, invoiceId } = (await household.invoice([{ sku: 'large-pepperoni', qty: 1 }])) as {
      invoice: string;
      invoiceId: string;
    };
    const approvalId = await household.approve(invoice);
    await household.call('await_approval', { approvalId }, 'await approval');
    const charged = await household.call(
      'payments__charge_invoice',
      { invoiceId, amountCents: 1500, merchantId: runtime.merchant?.did, approvalId },
      'pay charge invoice payment',
    );
    expect(charged.json, textOf(charged.result)).toMatchObject({ status: 'succeeded' });
    const fulfilled = await household.call('pizza__fulfill', { receipt: charged.json?.receipt }, 'fulfill order');
    const recorded = await household.call(
      'record_fulfillment',
      { commitment: fulfilled.json?.commitment },
      'record fulfillment',
    );
    expect(recorded.json).toEqual({ approvalId, status: 'fulfilled' });
    rowsWhileRunning = (await runtime.audit.head()).rowId;
  } finally {
    await household.close();
  }
  rows = countRows(dataDir);
}, 120_000);

afterAll(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** Runs `npm run audit:verify -- --data <folder>` as an operator would; its exit code and output. */
function auditVerify(folder: string): Promise<{ code: number; output: string }> {
  const environment = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('EXTENSIBLE_MCP_')),
  );
  return new Promise((resolve) => {
    execFile(
      'npm',
      ['run', '--silent', 'audit:verify', '--', '--data', folder],
      { cwd: root, env: environment },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, output: `${stdout}${stderr}` });
      },
    );
  });
}

/** A copy of the run's data folder, changed by `change` as a tamperer would. */
function tampered(change: Parameters<typeof tamperWith>[1]): string {
  const copy = copyDataFolder(dataDir);
  folders.push(copy);
  tamperWith(copy, change);
  return copy;
}

function checkpointLines(folder: string): Array<{ rowId: number; hash: string; credential: string }> {
  return readFileSync(join(folder, auditCheckpointsFileName), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { rowId: number; hash: string; credential: string });
}

async function verdictOf(folder: string) {
  return verifyAuditChain({
    databasePath: join(folder, 'household.sqlite'),
    checkpointsPath: join(folder, auditCheckpointsFileName),
    adminDid: adminDocument.id,
    adminJwk: adminDocument.verificationMethod[0]?.publicKeyJwk ?? {},
  });
}

describe('a real run', () => {
  it('appends every event of the runtime bus, in order, from the events of the start on', async () => {
    const store = openSqliteHouseholdStore({ path: join(dataDir, 'household.sqlite') });
    try {
      const entries = await store.audit.after(0, { limit: 10_000 });
      // Identity's enrollment codes are issued before the store is wired: they are held, then appended first.
      expect(entries[0]?.event.kind).toBe('enrollment-code-issued');
      expect(entries.map((entry) => entry.event)).toEqual(busEvents);
      expect(rowsWhileRunning).toBeGreaterThan(10);
      expect(rows).toBe(busEvents.length);
    } finally {
      store.close();
    }
  });

  it('records the whole order, and audit:verify passes with every row under the shutdown checkpoint', async () => {
    expect(rows).toBeGreaterThan(10);
    // The order's decisions are in the chain: policy, approvals, the charge.
    const store = openSqliteHouseholdStore({ path: join(dataDir, 'household.sqlite') });
    try {
      const kinds = new Set((await store.audit.after(0, { limit: 10_000 })).map((entry) => entry.event.kind));
      expect(kinds).toContain('approval-created');
      expect(kinds).toContain('approval-approved');
      expect([...kinds].some((kind) => kind.startsWith('charge'))).toBe(true);
    } finally {
      store.close();
    }
    const { code, output } = await auditVerify(dataDir);
    expect(output.trim()).toBe(
      `audit chain verified: ${rows} rows, checkpoint at row ${rows} signed by ${adminDocument.id}`,
    );
    expect(code).toBe(0);
  });

  it('keeps the checkpoints in an owner-only file outside the table, each verified by Veramo too', async () => {
    const path = join(dataDir, auditCheckpointsFileName);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const lines = checkpointLines(dataDir);
    expect(lines.at(-1)?.rowId).toBe(rows);
    const veramo = createVeramoVerifier({ adminDocument });
    for (const line of lines) {
      const verdict = await veramo(line.credential, {
        type: 'AuditCheckpoint',
        issuer: adminDocument.id,
        now: new Date(),
      });
      expect(verdict.verified, JSON.stringify(verdict)).toBe(true);
      if (verdict.verified) expect(verdict.credential.subject).toMatchObject({ rowId: line.rowId, hash: line.hash });
    }
  });
});

describe('a tampered audit table', () => {
  it('one row edited: audit:verify names it', async () => {
    const folder = tampered((database) => editRow(database, 5));
    expect(await verdictOf(folder)).toMatchObject({ ok: false, rowId: 5 });
    const { code, output } = await auditVerify(folder);
    expect(output).toMatch(/^audit chain broken at row 5: row 5's contents do not match its hash/m);
    expect(code).toBe(1);
  });

  it('one row deleted: audit:verify names it', async () => {
    const folder = tampered((database) => deleteRow(database, 7));
    const { code, output } = await auditVerify(folder);
    expect(output).toMatch(/^audit chain broken at row 7: row 7 is missing: the next row is 8/m);
    expect(code).toBe(1);
  });

  it('two rows reordered (ids swapped): audit:verify names the first', async () => {
    const folder = tampered((database) => swapRows(database, 3, 4));
    const { code, output } = await auditVerify(folder);
    expect(output).toMatch(/^audit chain broken at row 3: row 3 does not follow row 2/m);
    expect(code).toBe(1);
  });

  it('the last rows deleted: audit:verify names the first missing row from the checkpoint', async () => {
    const folder = tampered((database) => deleteTail(database, 3));
    const { code, output } = await auditVerify(folder);
    expect(output).toMatch(
      new RegExp(
        `^audit chain broken at row ${rows - 2}: rows ${rows - 2} to ${rows} are missing.*last rows were deleted`,
        'm',
      ),
    );
    expect(code).toBe(1);
  });

  it('one row edited and every later hash recomputed: the checkpoint catches it at its row', async () => {
    const folder = tampered((database) => editAndRecompute(database, 5));
    // The rewritten chain is consistent in itself: only a signed checkpoint at or after row 5 can tell.
    const caughtAt = Math.min(
      ...checkpointLines(folder)
        .map((line) => line.rowId)
        .filter((rowId) => rowId >= 5),
    );
    const { code, output } = await auditVerify(folder);
    expect(output).toMatch(
      new RegExp(
        `^audit chain broken at row ${caughtAt}: row ${caughtAt}'s hash is not the one the household admin signed`,
        'm',
      ),
    );
    expect(code).toBe(1);
  });
});

describe('a tampered checkpoints file', () => {
  it('a checkpoint whose signed payload was changed (forged signature) is refused', async () => {
    const folder = tampered(() => undefined);
    const lines = checkpointLines(folder);
    const last = lines.at(-1);
    if (!last) throw new Error('no checkpoint');
    // Move the signed head back to row 1 (hiding everything after it), keeping the old signature.
    const [header, payload, signature] = last.credential.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    claims.vc.credentialSubject.rowId = 1;
    const forged = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${signature}`;
    appendFileSync(
      join(folder, auditCheckpointsFileName),
      `${JSON.stringify({ ...last, rowId: 1, credential: forged })}\n`,
    );
    expect(await verdictOf(folder)).toMatchObject({ ok: false, rowId: 1 });
    const { code, output } = await auditVerify(folder);
    expect(output).toMatch(
      /^audit chain broken at row 1: the checkpoint on line \d+ .* its signature does not verify/m,
    );
    expect(code).toBe(1);
  });

  it('a checkpoint signed by another household admin key (same DID) over a rewritten chain is refused', async () => {
    // The tamperer rewrites the chain and signs its new head with a key of their own under the same did:web.
    const folder = tampered((database) => editAndRecompute(database, 2));
    const otherDir = mkdtempSync(join(tmpdir(), 'audit-other-admin-'));
    folders.push(otherDir);
    const otherStore = openSqliteHouseholdStore({ path: join(otherDir, 'household.sqlite') });
    try {
      const other = await openHousehold({ store: otherStore.identity, dataDir: otherDir, adminDid: adminDocument.id });
      expect(other.adminJwk).not.toEqual(adminDocument.verificationMethod[0]?.publicKeyJwk);
      const head = await tamperedHead(folder);
      const credential = await other.issue({
        signer: 'admin',
        type: 'AuditCheckpoint',
        subject: other.adminDid,
        claims: head,
        now: new Date(),
      });
      // The file is replaced with the tamperer's checkpoint only: the real ones would give them away.
      writeFileSync(join(folder, auditCheckpointsFileName), `${JSON.stringify({ ...head, credential })}\n`);
    } finally {
      otherStore.close();
    }
    const { code, output } = await auditVerify(folder);
    expect(output).toMatch(
      new RegExp(
        `^audit chain broken at row ${rows}: the checkpoint on line 1 .* is not signed by the household admin`,
        'm',
      ),
    );
    expect(code).toBe(1);
  });

  it('the checkpoints file deleted: a non-empty chain without a signed checkpoint is refused', async () => {
    const folder = tampered(() => undefined);
    rmSync(join(folder, auditCheckpointsFileName));
    const { code, output } = await auditVerify(folder);
    expect(output).toMatch(/^audit chain broken at row 1: no checkpoint signed by the household admin/m);
    expect(code).toBe(1);
  });
});

/** The head of a tampered copy's chain: what a tamperer would sign. */
async function tamperedHead(folder: string): Promise<{ rowId: number; hash: string }> {
  const store = openSqliteHouseholdStore({ path: join(folder, 'household.sqlite') });
  try {
    return await store.audit.head();
  } finally {
    store.close();
  }
}
