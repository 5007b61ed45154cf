import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { issueEnrollmentCodes, type Role, roles, trustMerchant } from '../identity/index';
import { runPinsCommand, signalRunningProxy } from '../proxy/index';
import { auditCheckpointsFileName } from './audit/audit-checkpoints';
import { type HouseholdEnv, readHouseholdEnv } from './env';
import { householdPidTarget } from './hold-household-pid-file';
import { migrateHouseholdStore } from './migrate-household-store';
import { moveHouseholdToPostgres } from './move-household-to-postgres';
import { openIdentity, storeFileName } from './start-identity';
import {
  describeHouseholdStore,
  type HouseholdStoreLocation,
  householdStoreLocation,
  openHouseholdStore,
} from './store';

const usage = `Usage: npm run household -- <command>

  rotate-codes [--role child|parent]   new enrollment codes (every role without a passkey, or the role named)
  trust-merchant <did:key> [--name N]  pin a merchant's DID and key as trusted
  show-settlement-did                  print the settlement service's DID (for the shop's configuration)
  show-did-document                    print the household admin's DID document
  status                               DIDs, enrolled roles, trusted merchants
  migrate                              apply the store's missing migrations, say what was applied, exit
  move-to-postgres                     copy the data folder's SQLite household into the empty DATABASE_URL database
  pins list|diff|accept|reject ...     review the shop's held tool definitions (pins --help)

Reads EXTENSIBLE_MCP_DATA (default ./.data), DATABASE_URL (the store on PostgreSQL; default the
SQLite file in the data folder) and EXTENSIBLE_MCP_ORIGIN (default http://localhost:3000).`;

/**
 * The household operator's commands (SPEC §5.3, §8): the only way besides the runtime's own setup
 * to issue enrollment codes or trust a merchant. Codes go to this terminal and nowhere else.
 */
export async function runHouseholdCli(argv: readonly string[], print: (line: string) => void): Promise<number> {
  if (argv[0] === 'pins') return runHouseholdPins(argv.slice(1), print);
  const { positionals, values } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: { role: { type: 'string' }, name: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  const [command, ...rest] = positionals;
  if (values.help || command === undefined) {
    print(usage);
    return command === undefined && !values.help ? 2 : 0;
  }
  const role = values.role;
  if (role !== undefined && !roles.includes(role as Role)) {
    print(`--role must be one of ${roles.join(', ')}`);
    return 2;
  }
  const env = readHouseholdEnv();
  // The one place this process chooses its store: DATABASE_URL, else the data folder's SQLite file.
  const location = householdStoreLocation(env);
  if (command === 'migrate') return runMigrate(location, print);
  if (command === 'move-to-postgres') return runMoveToPostgres(env, print);
  // Opening changes nothing but a first start's setup: only rotate-codes invalidates codes.
  const identity = await openIdentity(env, { store: await openHouseholdStore(location) });
  try {
    const store = identity.store.identity;
    switch (command) {
      case 'rotate-codes': {
        const codes = await issueEnrollmentCodes({
          store,
          now: new Date(),
          ...(role === undefined ? {} : { roles: [role as Role] }),
        });
        if (codes.length === 0) print('Every role has a passkey. Use --role to enrol another device for a role.');
        for (const { role: codeRole, code } of codes) print(`Enrollment code for ${codeRole}: ${code}`);
        return 0;
      }
      case 'trust-merchant': {
        const did = rest[0];
        if (did === undefined) {
          print('trust-merchant needs the merchant DID (the shop prints it, and merchant_card returns it).');
          return 2;
        }
        const merchant = await trustMerchant(store.merchants, {
          did,
          name: values.name ?? 'Merchant',
          now: new Date(),
        });
        print(`Trusted merchant ${merchant.name}: ${merchant.did}`);
        return 0;
      }
      case 'show-settlement-did':
        print(identity.household.settlementDid);
        return 0;
      case 'show-did-document':
        print(JSON.stringify(identity.household.adminDocument, null, 2));
        return 0;
      case 'status': {
        print(`Household: ${identity.household.adminDid}`);
        for (const member of roles) {
          const enrolled = (await store.passkeys.listByRole(member)).length;
          print(`  ${member}: ${identity.household.members[member]} (${enrolled} passkey${enrolled === 1 ? '' : 's'})`);
        }
        print(`Settlement: ${identity.household.settlementDid}`);
        for (const merchant of await store.merchants.list())
          print(`Trusted merchant ${merchant.name}: ${merchant.did}`);
        return 0;
      }
      default:
        print(`Unknown command "${command}".\n\n${usage}`);
        return 2;
    }
  } finally {
    identity.close();
  }
}

/**
 * `npm run household -- migrate` (issue 28): the configured store's missing migrations, applied
 * once, per module in words; a second run applies nothing. Creates a missing SQLite file, as a
 * first start would, and nothing else: no household is set up.
 */
async function runMigrate(location: HouseholdStoreLocation, print: (line: string) => void): Promise<number> {
  const outcome = await migrateHouseholdStore(location);
  print(`Migrated the household store: ${describeHouseholdStore(location)}`);
  for (const { module, applied, version } of outcome.modules) {
    print(
      applied.length === 0
        ? `  ${module}: up to date at version ${version}`
        : `  ${module}: applied version${applied.length === 1 ? '' : 's'} ${applied.join(', ')} (now at ${version})`,
    );
  }
  return 0;
}

/**
 * `npm run household -- move-to-postgres` (issue 28): the data folder's SQLite household into the
 * empty database `DATABASE_URL` names, all or nothing, then one line per table. The app stays
 * stopped while it runs; afterwards it starts with `DATABASE_URL` and the same data folder (the
 * sealing key stays in its file).
 */
async function runMoveToPostgres(env: HouseholdEnv, print: (line: string) => void): Promise<number> {
  if (env.databaseUrl === undefined) {
    print('move-to-postgres needs DATABASE_URL: the empty PostgreSQL database to move the household into.');
    return 2;
  }
  const target = { kind: 'postgres', url: env.databaseUrl } as const;
  const source = { kind: 'sqlite', path: join(env.dataDir, storeFileName) } as const;
  try {
    const moved = await moveHouseholdToPostgres({
      sqlitePath: source.path,
      checkpointsPath: join(dirname(source.path), auditCheckpointsFileName),
      url: env.databaseUrl,
    });
    print(`Moved the household from the ${describeHouseholdStore(source)} to the ${describeHouseholdStore(target)}`);
    for (const { table, rows } of moved.tables) print(`  ${table}: ${rows} row${rows === 1 ? '' : 's'}`);
    print(`  audit checkpoints: ${moved.checkpoints}`);
    print('Start the app with DATABASE_URL set and this data folder (it keeps the sealing key).');
    return 0;
  } catch (error) {
    print(`The household was not moved: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}

const pinsUsage = `Usage: npm run household -- pins <command>

  list [--json]                    every tool's state (pinned, pending-changed, pending-new, rejected)
  diff <server> [tool]             what changed in each pending definition
  accept <server> (<tool> | --all) the pending definition becomes the pin (an upgraded shop's new tool)
  reject <server> [tool]           the pending definition is refused for good

Works on the household store in EXTENSIBLE_MCP_DATA (default ./.data). accept and reject then
send SIGHUP to the app running on that data folder (its pid file, household.sqlite.pid there),
which checks the shop's listing against the store again: an accepted tool is found and called at
once, with no restart. With no app running, the decision applies at its next start (docs/pinning.md).`;

/**
 * `npm run household -- pins …` (SPEC §3.13, docs/pinning.md): the proxy's pins commands on the
 * household store, the operator's upgrade step for a shop tool that is new or changed. Never
 * creates the store: a missing file is the wrong data folder, not an empty household.
 */
async function runHouseholdPins(argv: readonly string[], print: (line: string) => void): Promise<number> {
  const env = readHouseholdEnv();
  const { dataDir } = env;
  const location = householdStoreLocation(env);
  return runPinsCommand({
    argv,
    io: { out: print, err: print },
    name: 'npm run household -- pins',
    help: pinsUsage,
    open: async (flags) => {
      if (flags.config !== undefined || flags.store !== undefined) {
        return "--config and --store are the proxy CLI's; the household store is in EXTENSIBLE_MCP_DATA";
      }
      if (location.kind === 'sqlite' && !existsSync(location.path)) {
        return `no household store at ${location.path}: has the app run with this EXTENSIBLE_MCP_DATA?`;
      }
      const store = await openHouseholdStore(location);
      return {
        store: store.pins,
        afterDecision() {
          const signal = signalRunningProxy(householdPidTarget(dataDir));
          return signal.signalled
            ? `signalled the running app (pid ${signal.pid}); it checks the shop's listing against the store now`
            : `no running app signalled (pid file ${signal.reason}); the decision takes effect at the app's next start`;
        },
        close: () => store.close(),
      };
    },
  });
}
