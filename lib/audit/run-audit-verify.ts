import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { type HouseholdEnv, readHouseholdEnv } from '../env';
import { type OpenIdentity, openIdentity, storeFileName } from '../start-identity';
import {
  describeHouseholdStore,
  type HouseholdStoreLocation,
  householdStoreLocation,
  openHouseholdStore,
} from '../store';
import { auditCheckpointsFileName } from './audit-checkpoints';
import { createShopWitness, shopWitnessEndpoint } from './shop-witness';
import { verifyAuditChain } from './verify-audit-chain';
import { createFileWitness, type Witness } from './witness';

const usage = `Usage: npm run audit:verify [-- --data <folder>] [--witness shop|file:<path>|<url>]…

Re-walks the household's audit chain from row 1 and checks it against the newest checkpoint the
household admin signed. Exit 0 when it verifies, 1 when it is broken or cannot be read.

  --witness shop         also check it against what the shop's witness holds (its /witness beside
                         PIZZA_URL, else a --witness child of the shop on <data>/shop); in docker, run
                         it inside the app container: the host cannot reach the shop
  --witness file:<path>  against an append-only witness file (EXTENSIBLE_MCP_AUDIT_WITNESS_FILE)
  --witness <url>        against a shop witness at that URL (http(s)://…/witness)

A rollback of the table and the checkpoints file together is reported against the witness, with the
last row the witness vouches for.

With DATABASE_URL (postgres://…) it verifies the chain in that database's audit_log table against
the checkpoints in its audit_checkpoints table, whichever instances wrote them.

Reads EXTENSIBLE_MCP_DATA (default ./.data; --data wins), DATABASE_URL, EXTENSIBLE_MCP_ORIGIN
(default http://localhost:3000), PIZZA_URL and PIZZA_WITNESS_URL.`;

/**
 * `npm run audit:verify` (SPEC §8): verifies the household's audit chain (the data folder's file, or the `DATABASE_URL` database's table) against the admin's
 * pinned key — and, with `--witness`, against what each witness holds — and prints one line:
 * `audit chain verified: …` or `audit chain broken at row R: …`. Returns the exit code: 0 verified,
 * 1 broken or unreadable, 2 bad usage.
 */
export async function runAuditVerify(argv: readonly string[], print: (line: string) => void): Promise<number> {
  let values: { data?: string | undefined; witness?: string[] | undefined; help?: boolean | undefined };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        data: { type: 'string' },
        witness: { type: 'string', multiple: true },
        help: { type: 'boolean', short: 'h' },
      },
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
  const location = householdStoreLocation(env);
  const databasePath = join(env.dataDir, storeFileName);
  // Opening the store would create an empty household: a missing household is an error, not an empty chain.
  if (location.kind === 'sqlite' && !existsSync(databasePath)) {
    print(`no household database in ${env.dataDir}: nothing to verify`);
    return 1;
  }
  if (location.kind === 'postgres' && !(await postgresHasHousehold(location.url))) {
    print(`no household in the ${describeHouseholdStore(location)}: nothing to verify`);
    return 1;
  }
  // The admin's key, as the household pinned it (the same document /.well-known/did.json serves).
  const identity = await openIdentity(env, { store: await openHouseholdStore(location) });
  const { adminDid, adminJwk } = identity.household;
  let witnesses: Witness[];
  try {
    witnesses = (values.witness ?? []).map((spec) => witnessOf(spec, env, identity));
  } catch (error) {
    identity.close();
    print(`${error instanceof Error ? error.message : String(error)}\n\n${usage}`);
    return 2;
  }
  try {
    const verdict = await verifyAuditChain({
      // On PostgreSQL the chain and the checkpoints are the database's tables, read through the store.
      ...(location.kind === 'postgres'
        ? { audit: identity.store.audit, checkpoints: identity.store.checkpoints }
        : { databasePath, checkpointsPath: join(env.dataDir, auditCheckpointsFileName) }),
      adminDid,
      adminJwk,
      ...(values.witness === undefined ? {} : { witnesses }),
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
    const witnessed = (verdict.witnessed ?? [])
      .map((vouch) => `; the witness ${vouch.witness} vouches for rows 1 to ${vouch.rowId}`)
      .join('');
    print(
      `audit chain verified: ${verdict.rows} rows, checkpoint at row ${rowId} signed by ${signedBy}${unsigned}${witnessed}`,
    );
    return 0;
  } finally {
    await Promise.all(witnesses.map((witness) => witness.close()));
    identity.close();
  }
}

/** Whether the PostgreSQL database holds a household (its identity table and household record): read only. */
async function postgresHasHousehold(
  url: Extract<HouseholdStoreLocation, { kind: 'postgres' }>['url'],
): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const table = await client.query<{ present: boolean }>(
      "SELECT to_regclass('public.identity_records') IS NOT NULL AS present",
    );
    if (table.rows[0]?.present !== true) return false;
    const record = await client.query("SELECT 1 FROM identity_records WHERE kind = 'household' AND id = 'household'");
    return record.rowCount === 1;
  } finally {
    await client.end();
  }
}

/** One `--witness` value as a witness: `shop`, `file:<path>` (or a path), or the URL of a shop's `/witness`. */
function witnessOf(spec: string, env: HouseholdEnv, identity: OpenIdentity): Witness {
  const merchantJwk = async () => {
    const did = await identity.store.identity.records.get('household', 'merchant:pizza');
    return did === undefined ? undefined : (await identity.store.identity.merchants.get(did))?.publicKeyJwk;
  };
  const adminJwk = identity.household.adminJwk;
  if (spec === 'shop') return createShopWitness({ endpoint: shopWitnessEndpoint(env), adminJwk, merchantJwk });
  if (/^https?:\/\//.test(spec))
    return createShopWitness({ endpoint: { kind: 'http', url: spec }, adminJwk, merchantJwk });
  const path = spec.startsWith('file:') ? spec.slice('file:'.length) : spec;
  if (path === '') throw new Error('--witness file: needs a path');
  return createFileWitness(resolve(path));
}
