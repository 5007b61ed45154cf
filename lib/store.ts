import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { type AllowanceStore, type CallApprovalStore, IdentityError, type IdentityStore } from '../identity/index';
import {
  createSqliteDiscoveryStore,
  createSqliteEvidenceStore,
  createSqlitePinStore,
  type DiscoveryStore,
  discoveryStoreMigrations,
  type EvidenceStore,
  evidenceStoreMigrations,
  type PinStore,
  pinStoreMigrations,
} from '../proxy/index';
import { type ChatStore, chatMigrations, createSqliteChatStore } from './agent/chat-store';
import { createSqliteTurnLeaseStore, type TurnLeaseStore, turnLeaseMigrations } from './agent/turn-leases';
import { allowanceMigrations } from './allowance-migrations';
import { applyMigrations, type Migration } from './apply-migrations';
import { auditCheckpointsFileName } from './audit/audit-checkpoints';
import { type AuditLog, createSqliteAuditLog } from './audit/audit-log';
import { auditMigrations } from './audit/audit-migrations';
import {
  type CheckpointLeaseStore,
  checkpointLeaseMigrations,
  createSqliteCheckpointLeaseStore,
} from './audit/checkpoint-lease';
import { type CheckpointStore, createFileCheckpointStore } from './audit/checkpoint-store';
import { callApprovalMigrations } from './call-approval-migrations';
import type { HouseholdEnv } from './env';
import { identityMigrations } from './identity-migrations';
import type { RequestLimitStore } from './limits/request-limits';
import { createSqliteRequestLimitStore, requestLimitMigrations } from './limits/sqlite-request-limits';
import { createSqliteMockRailStore, type MockRailStore, mockRailMigrations } from './payments/mock-rail';
import { createSqlitePaymentStore, type PaymentStore, paymentsMigrations } from './payments/payment-store';
import { openPostgresHouseholdStore } from './postgres-household-store';
import { createSqliteAllowanceStore } from './sqlite-allowance-store';
import { createSqliteCallApprovalStore } from './sqlite-call-approval-store';
import { createSqliteIdentityStore } from './sqlite-identity-store';

/**
 * Each module's migrations on the SQLite file, applied in this order on every open. A module that
 * needs tables adds one line here (e.g. `payments: paymentsMigrations`), and its PostgreSQL list
 * to `postgresHouseholdMigrations`; its versions are counted separately.
 */
export const sqliteHouseholdMigrations: Readonly<Record<string, readonly Migration[]>> = {
  identity: identityMigrations,
  payments: paymentsMigrations,
  evidence: evidenceStoreMigrations,
  'mock-rail': mockRailMigrations,
  chat: chatMigrations,
  audit: auditMigrations,
  discovery: discoveryStoreMigrations,
  // The same module as the CLI's `--store` file (docs/pinning.md).
  pins: pinStoreMigrations,
  // After identity: the limits count pending requests from its `approvals` table.
  limits: requestLimitMigrations,
  // Approval requests for gated non-payment calls (docs/human-authority.md), apart from `approvals`.
  'call-approvals': callApprovalMigrations,
  // Who runs each chat turn, so another instance finishes an order whose instance died (docs/scale-out.md).
  'turn-leases': turnLeaseMigrations,
  // Standing allowances, their revocations and spent budgets (docs/human-authority.md).
  allowances: allowanceMigrations,
  // Which instance signs the audit chain's checkpoints (docs/scale-out.md).
  'checkpoint-lease': checkpointLeaseMigrations,
};

/** Most unexpired single-use evidence ids held at once; beyond it a call is refused, never evicting one. */
export const evidenceCapacity = 100_000;

/**
 * Where the household's store is (SPEC §11, issue 28): its one SQLite file (normally
 * `<data folder>/household.sqlite`, its folder created if missing), or a PostgreSQL database that
 * several instances share. A URL may hold a password: it is never logged (see {@link describeHouseholdStore}).
 */
export type HouseholdStoreLocation =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'postgres'; readonly url: string };

/**
 * The one place the household's store is chosen (STYLE: composition root): `DATABASE_URL` when set,
 * else the SQLite file in the data folder. Each process's root (the runtime, the household CLI,
 * `audit:verify`) calls it once and opens what it names; nothing else decides.
 */
export function householdStoreLocation(env: HouseholdEnv): HouseholdStoreLocation {
  if (env.databaseUrl !== undefined) return { kind: 'postgres', url: env.databaseUrl };
  return { kind: 'sqlite', path: join(env.dataDir, storeFileName) };
}

/** File name of the household database inside the data folder. */
export const storeFileName = 'household.sqlite';

/** A location in words for the terminal: the file, or the database and its host, never the user, password or options. */
export function describeHouseholdStore(location: HouseholdStoreLocation): string {
  if (location.kind === 'sqlite') return `SQLite file ${location.path}`;
  const url = new URL(location.url);
  const database = decodeURIComponent(url.pathname.slice(1)) || '(default)';
  return `PostgreSQL database ${database} on ${url.searchParams.get('host') ?? url.host}`;
}

/** The household's store, opened and migrated, with each module's store on it (SQLite or PostgreSQL). */
export interface HouseholdStore {
  /** Where this store is. */
  readonly location: HouseholdStoreLocation;
  readonly identity: IdentityStore;
  readonly payments: PaymentStore;
  /** Spent and held single-use evidence (SPEC §4.7). */
  readonly evidence: EvidenceStore;
  /** The mock rail's own ledger: what the "bank" charged, by idempotency key. */
  readonly mockRail: MockRailStore;
  /** Chat sessions and their event logs (SPEC §8: a reload loses nothing). */
  readonly chat: ChatStore;
  /** The append-only, hash-chained audit log of every household event (SPEC §8). */
  readonly audit: AuditLog;
  /** What each chat (and each `/mcp` session) has discovered (SPEC §3.5): any instance can take a turn over. */
  readonly discovery: DiscoveryStore;
  /** The bounds on approval requests and invoices per caller and per household (issue 26 defect 6). */
  readonly limits: RequestLimitStore;
  /** The shop's and every other server's pinned tool definitions (SPEC §3.13): never memory-only. */
  readonly pins: PinStore;
  /** Requests for a person's passkey yes to one gated non-payment call (docs/human-authority.md). */
  readonly callApprovals: CallApprovalStore;
  /** Chat turns' leases: a turn whose instance died is taken over by another (docs/scale-out.md). */
  readonly turnLeases: TurnLeaseStore;
  /**
   * The audit chain's signed checkpoints (SPEC §8): the JSON-lines file beside the SQLite file, or
   * the shared table on PostgreSQL. The witness stays outside either.
   */
  readonly checkpoints: CheckpointStore;
  /** Which instance signs the checkpoints: one signer per checkpoint period, however many instances (docs/scale-out.md). */
  readonly checkpointLease: CheckpointLeaseStore;
  /** Standing allowances the parent signed, their revocations and spent budgets (docs/human-authority.md). */
  readonly allowances: AllowanceStore;
  /**
   * Closes the connection (SQLite) or ends the pool (PostgreSQL, in the background: queries already
   * sent finish first); every store on it is unusable afterwards.
   */
  close(): void;
}

/**
 * The one opener of the household's store (SPEC §2, §11): the SQLite file, or the PostgreSQL
 * database at `location` with every module's twin on one pool. Either way every module's missing
 * migrations are applied, and a schema newer than this code is refused. Faults throw
 * `IdentityError('store-failed')` with the cause kept.
 */
export async function openHouseholdStore(location: HouseholdStoreLocation): Promise<HouseholdStore> {
  if (location.kind === 'postgres') return openPostgresHouseholdStore({ url: location.url });
  return openSqliteHouseholdStore({ path: location.path });
}

/**
 * The household SQLite file, opened synchronously: what `openHouseholdStore` opens for a `sqlite`
 * location, for tools and tests that work on the file itself. Creates the data folder (0700) and
 * the file (0600) on first open, and turns on WAL and a busy timeout so several processes can
 * share it. Faults throw `IdentityError('store-failed')` with the cause kept.
 */
export function openSqliteHouseholdStore(options: { readonly path: string }): HouseholdStore {
  const { path } = options;
  let database: Database.Database | undefined;
  try {
    database = openHouseholdFile(path);
    applyMigrations(database, sqliteHouseholdMigrations);
    const opened = database;
    return {
      location: { kind: 'sqlite', path },
      identity: createSqliteIdentityStore(opened),
      payments: createSqlitePaymentStore(opened),
      evidence: createSqliteEvidenceStore(opened, { capacity: evidenceCapacity }),
      mockRail: createSqliteMockRailStore(opened),
      chat: createSqliteChatStore(opened),
      audit: createSqliteAuditLog(opened),
      discovery: createSqliteDiscoveryStore(opened),
      limits: createSqliteRequestLimitStore(opened),
      pins: createSqlitePinStore(opened),
      callApprovals: createSqliteCallApprovalStore(opened),
      turnLeases: createSqliteTurnLeaseStore(opened),
      checkpoints: createFileCheckpointStore(join(dirname(path), auditCheckpointsFileName)),
      allowances: createSqliteAllowanceStore(opened),
      checkpointLease: createSqliteCheckpointLeaseStore(opened),
      close: () => {
        opened.close();
      },
    };
  } catch (error) {
    database?.close();
    const detail = error instanceof Error ? `: ${error.message}` : '';
    throw new IdentityError('store-failed', `cannot open household store ${path}${detail}`, { cause: error });
  }
}

/**
 * Opens the household SQLite file, not yet migrated: creates the data folder (0700) and the file
 * (0600) if missing, and turns on WAL, a busy timeout (several processes share it) and foreign
 * keys. Throws as the driver does; the caller closes the handle.
 */
export function openHouseholdFile(path: string): Database.Database {
  // The folder and file hold keys' metadata, enrollment codes' hashes and approvals: owner only.
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  closeSync(openSync(path, 'a', 0o600));
  chmodSync(path, 0o600);
  const database = new Database(path);
  try {
    database.pragma('journal_mode = WAL');
    database.pragma('busy_timeout = 5000');
    database.pragma('foreign_keys = ON');
    return database;
  } catch (error) {
    database.close();
    throw error;
  }
}
