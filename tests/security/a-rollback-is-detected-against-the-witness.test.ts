import { mkdtempSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { auditCheckpointsFileName } from '../../lib/audit/audit-checkpoints';
import type { HouseholdEvent } from '../../lib/events';
import { tamperWith } from '../audit/tamper';
import { startTestHousehold, type TestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';
import { auditVerify, checkpointLines } from './fixtures/audit-verify';
import { startHttpShop } from './fixtures/http-shop';

// Issue 26, defect 2: dropping the newest lines of the checkpoints file and truncating the table to
// match removed rows and checkpoints together, and the chain still verified — whoever holds the disk
// could rewrite history. A fresh household orders twice; the tamperer rolls table and checkpoints
// back to the end of the first order, exactly so; `npm run audit:verify -- --witness …` must report
// the rollback and name the last row the witness vouches for. Once with the demo's default layout
// (the shop a stdio child, its data folder inside the household's), once with a witness that does
// not share the household's disk (the shop over HTTP on its own folder, and an append-only file
// elsewhere).
const folders: string[] = [];
afterAll(async () => {
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

function folder(prefix: string): string {
  const path = mkdtempSync(join(tmpdir(), prefix));
  folders.push(path);
  return path;
}

/** One whole cheese-slice order up to the charge, as the model drives it through the proxy. */
async function order(household: TestHousehold): Promise<void> {
  const { args } = await household.approvedSlice();
  const charged = await household.call('payments__charge_invoice', args, 'pay charge invoice payment');
  expect(charged.json, textOf(charged.result)).toMatchObject({ status: 'succeeded' });
}

/** Two orders on a fresh household; the chain's head after the first, and after the orderly stop. */
async function ordersTwice(
  dataDir: string,
  env: Readonly<Record<string, string>> = {},
): Promise<{ first: number; last: number }> {
  const household = await startTestHousehold({ dataDir, env, auditCheckpointEvery: 10 });
  let first = 0;
  try {
    await order(household);
    // Every checkpoint requested so far is on disk and witnessed before the second order starts.
    await household.runtime.checkpoints.checkpoint();
    first = (await household.runtime.audit.head()).rowId;
    await order(household);
  } finally {
    await household.close();
  }
  const last = (await checkpointLines(join(dataDir, auditCheckpointsFileName))).at(-1)?.rowId ?? 0;
  return { first, last };
}

/**
 * What defect 2 did: drop the newest lines of the checkpoints file, back to the last one at or before
 * `row`, and truncate the table to match. Returns the row the chain now ends at.
 */
async function rollBack(dataDir: string, row: number): Promise<number> {
  const path = join(dataDir, auditCheckpointsFileName);
  const lines = (await readFile(path, 'utf8')).split('\n').filter(Boolean);
  const kept = lines.filter((line) => (JSON.parse(line) as { rowId: number }).rowId <= row);
  expect(kept.length).toBeLessThan(lines.length);
  await writeFile(path, `${kept.join('\n')}\n`);
  const end = (JSON.parse(kept.at(-1) ?? '{}') as { rowId: number }).rowId;
  tamperWith(dataDir, (database) => database.prepare('DELETE FROM audit_log WHERE id > ?').run(end));
  return end;
}

describe('table and checkpoints rolled back together', () => {
  it('the demo layout: audit:verify --witness shop reports the rollback and names the last row the shop vouches for', async () => {
    const dataDir = folder('rollback-demo-');
    const { first, last } = await ordersTwice(dataDir);
    const end = await rollBack(dataDir, first);
    expect(end).toBeLessThan(last);

    // Without a witness the rolled-back chain is consistent in itself: nothing on this disk can tell.
    const alone = await auditVerify(dataDir);
    expect(alone.output).toMatch(new RegExp(`^audit chain verified: ${end} rows`, 'm'));

    const { code, output } = await auditVerify(dataDir, { args: ['--witness', 'shop'] });
    expect(output).toMatch(
      new RegExp(
        `^audit chain broken at row ${end + 1}: the chain was rolled back: the witness shop vouches for rows 1 to ${last} .* the table ends at row ${end} .* The last row the witness vouches for is row ${last}$`,
        'm',
      ),
    );
    expect(code).toBe(1);

    // The next start on the rolled-back disk refuses to sign over it, and says why.
    const events: HouseholdEvent[] = [];
    const restarted = await startTestHousehold({ dataDir, enrol: false, onEvent: (event) => events.push(event) });
    await restarted.close();
    const refused = events.find((event) => event.kind === 'audit-checkpoint-refused');
    // (The table has the new start's own rows by then: it ends a little after `end`.)
    expect(refused?.message).toMatch(
      new RegExp(
        `the table ends at row \\d+, but the witness shop holds a checkpoint at row ${last} signed by the household admin \\(the table was rolled back\\)`,
      ),
    );
    expect((await checkpointLines(join(dataDir, auditCheckpointsFileName))).at(-1)?.rowId).toBe(end);
  }, 300_000);

  it('a witness that does not share the disk: the shop over HTTP on its own folder, and a witness file elsewhere', async () => {
    const dataDir = folder('rollback-household-');
    const shopDir = folder('rollback-shop-');
    const witnessFile = join(folder('rollback-witness-'), 'audit-witness.jsonl');
    const shop = await startHttpShop(shopDir);
    const env = { PIZZA_URL: `${shop.url}/mcp`, EXTENSIBLE_MCP_AUDIT_WITNESS_FILE: witnessFile };
    try {
      const { first, last } = await ordersTwice(dataDir, env);
      // Whoever holds the household's disk rolls it back; the shop's folder and the file are elsewhere.
      const end = await rollBack(dataDir, first);

      for (const witness of ['shop', `file:${witnessFile}`]) {
        const { code, output } = await auditVerify(dataDir, { args: ['--witness', witness], env });
        const name = witness === 'shop' ? 'shop' : `file ${witnessFile}`;
        expect(output).toContain(
          `audit chain broken at row ${end + 1}: the chain was rolled back: the witness ${name} vouches for rows 1 to ${last}`,
        );
        expect(output).toContain(`The last row the witness vouches for is row ${last}`);
        expect(code).toBe(1);
      }
    } finally {
      await shop.stop();
    }
  }, 300_000);
});
