import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { readHouseholdEnv } from '../env';
import { openIdentity, storeFileName } from '../start-identity';
import { auditCheckpointsFileName } from './audit-checkpoints';
import { verifyAuditChain } from './verify-audit-chain';

const usage = `Usage: npm run audit:verify [-- --data <folder>]

Re-walks the household's audit chain from row 1 and checks it against the newest checkpoint the
household admin signed. Exit 0 when it verifies, 1 when it is broken or cannot be read.

Reads EXTENSIBLE_MCP_DATA (default ./.data; --data wins) and EXTENSIBLE_MCP_ORIGIN (default http://localhost:3000).`;

/**
 * `npm run audit:verify` (SPEC §8): verifies the data folder's audit chain against the admin's
 * pinned key and prints one line — `audit chain verified: …` or `audit chain broken at row R: …`.
 * Returns the exit code: 0 verified, 1 broken or unreadable, 2 bad usage.
 */
export async function runAuditVerify(argv: readonly string[], print: (line: string) => void): Promise<number> {
  let values: { data?: string | undefined; help?: boolean | undefined };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: { data: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    }));
  } catch (error) {
    print(`${error instanceof Error ? error.message : String(error)}\n\n${usage}`);
    return 2;
  }
  if (values.help) {
    print(usage);
    return 0;
  }
  const base = readHouseholdEnv();
  const env = values.data === undefined ? base : { ...base, dataDir: resolve(values.data) };
  const databasePath = join(env.dataDir, storeFileName);
  // Opening the store would create an empty household: a missing file is an error, not an empty chain.
  if (!existsSync(databasePath)) {
    print(`no household database in ${env.dataDir}: nothing to verify`);
    return 1;
  }
  // The admin's key, as the household pinned it (the same document /.well-known/did.json serves).
  const identity = await openIdentity(env);
  const { adminDid, adminJwk } = identity.household;
  identity.close();

  const verdict = await verifyAuditChain({
    databasePath,
    checkpointsPath: join(env.dataDir, auditCheckpointsFileName),
    adminDid,
    adminJwk,
  });
  if (!verdict.ok) {
    print(`audit chain broken at row ${verdict.rowId}: ${verdict.reason}`);
    return 1;
  }
  if (verdict.checkpoint === undefined) {
    print(`audit chain verified: ${verdict.rows} rows, no checkpoint yet (the chain is empty)`);
    return 0;
  }
  const { rowId, signedBy } = verdict.checkpoint;
  const unsigned = verdict.rows > rowId ? `; rows ${rowId + 1} to ${verdict.rows} await the next checkpoint` : '';
  print(`audit chain verified: ${verdict.rows} rows, checkpoint at row ${rowId} signed by ${signedBy}${unsigned}`);
  return 0;
}
