import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
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
import { allowanceMigrations } from './allowance-migrations';
import { applyMigrations, type Migration } from './apply-migrations';
import { type AuditLog, createSqliteAuditLog } from './audit/audit-log';
import { auditMigrations } from './audit/audit-migrations';
import { callApprovalMigrations } from './call-approval-migrations';
import { identityMigrations } from './identity-migrations';
import type { RequestLimitStore } from './limits/request-limits';
import { createSqliteRequestLimitStore, requestLimitMigrations } from './limits/sqlite-request-limits';
import { createSqliteMockRailStore, type MockRailStore, mockRailMigrations } from './payments/mock-rail';
import { createSqlitePaymentStore, type PaymentStore, paymentsMigrations } from './payments/payment-store';
import { createSqliteAllowanceStore } from './sqlite-allowance-store';
import { createSqliteCallApprovalStore } from './sqlite-call-approval-store';
import { createSqliteIdentityStore } from './sqlite-identity-store';

/**
 * Each module's migrations, applied in this order on every open. A module that needs tables adds
 * one line here (e.g. `payments: paymentsMigrations`); its versions are counted separately.
 */
const migrations: Readonly<Record<string, readonly Migration[]>> = {
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
  // Standing allowances, their revocations and spent budgets (docs/human-authority.md).
  allowances: allowanceMigrations,
};

/** Most unexpired single-use evidence ids held at once; beyond it a call is refused, never evicting one. */
const evidenceCapacity = 100_000;

/** Options for {@link openHouseholdStore}. */
export interface HouseholdStoreOptions {
  /** The SQLite file, normally `<data folder>/household.sqlite`; its folder is created if missing. */
  readonly path: string;
}

/** The household's one SQLite file, opened and migrated, with each module's store on it. */
export interface HouseholdStore {
  /** The file this store opened. */
  readonly path: string;
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
  /** Standing allowances the parent signed, their revocations and spent budgets (docs/human-authority.md). */
  readonly allowances: AllowanceStore;
  /** Closes the connection; every store on it is unusable afterwards. */
  close(): void;
}

/**
 * The one opener of the household SQLite file (SPEC §2, §11). Creates the data folder (0700) and
 * the file (0600) on first open, turns on WAL and a busy timeout so several processes can share
 * it, and applies every module's missing migrations. Refuses a file whose schema is newer than
 * this code. Faults throw `IdentityError('store-failed')` with the cause kept.
 */
export function openHouseholdStore(options: HouseholdStoreOptions): HouseholdStore {
  let database: Database.Database | undefined;
  try {
    // The folder and file hold keys' metadata, enrollment codes' hashes and approvals: owner only.
    mkdirSync(dirname(options.path), { recursive: true, mode: 0o700 });
    closeSync(openSync(options.path, 'a', 0o600));
    chmodSync(options.path, 0o600);
    database = new Database(options.path);
    database.pragma('journal_mode = WAL');
    database.pragma('busy_timeout = 5000');
    database.pragma('foreign_keys = ON');
    applyMigrations(database, migrations);
    const opened = database;
    return {
      path: options.path,
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
      allowances: createSqliteAllowanceStore(opened),
      close: () => {
        opened.close();
      },
    };
  } catch (error) {
    database?.close();
    const detail = error instanceof Error ? `: ${error.message}` : '';
    throw new IdentityError('store-failed', `cannot open household store ${options.path}${detail}`, { cause: error });
  }
}
