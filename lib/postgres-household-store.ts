import type pg from 'pg';
import { IdentityError } from '../identity/index';
import {
  createPostgresDiscoveryStore,
  createPostgresEvidenceStore,
  createPostgresPinStore,
  type Migration,
  openPostgresPool,
  postgresDiscoveryStoreMigrations,
  postgresEvidenceStoreMigrations,
  postgresPinStoreMigrations,
} from '../proxy/index';
import { createPostgresChatStore, postgresChatMigrations } from './agent/postgres-chat-store';
import { createPostgresTurnLeaseStore, postgresTurnLeaseMigrations } from './agent/postgres-turn-leases';
import type { AuditLog } from './audit/audit-log';
import { createPostgresAuditLog, postgresAuditMigrations } from './audit/postgres-audit-log';
import {
  createPostgresCheckpointLeaseStore,
  postgresCheckpointLeaseMigrations,
} from './audit/postgres-checkpoint-lease';
import { createPostgresCheckpointStore, postgresCheckpointMigrations } from './audit/postgres-checkpoint-store';
import { createPostgresRequestLimitStore, postgresRequestLimitMigrations } from './limits/postgres-request-limits';
import { createPostgresMockRailStore, postgresMockRailMigrations } from './payments/postgres-mock-rail-store';
import { createPostgresPaymentStore, postgresPaymentsMigrations } from './payments/postgres-payment-store';
import { createPostgresAllowanceStore, postgresAllowanceMigrations } from './postgres-allowance-store';
import { createPostgresCallApprovalStore, postgresCallApprovalMigrations } from './postgres-call-approval-store';
import { createPostgresDecisionChannel } from './postgres-decision-channel';
import { createPostgresIdentityStore, postgresIdentityMigrations } from './postgres-identity-store';
import { evidenceCapacity, type HouseholdStore } from './store';

/** A household module's PostgreSQL twin: its migrations, and its store on the shared pool. */
export interface PostgresTwin<T> {
  readonly migrations: readonly Migration[];
  open(pool: pg.Pool): T;
}

/** The audit log's PostgreSQL twin: one chain with several writers (docs/scale-out.md). */
function postgresAuditLog(): PostgresTwin<AuditLog> {
  return { migrations: postgresAuditMigrations, open: (pool) => createPostgresAuditLog(pool) };
}

/**
 * Every household module's PostgreSQL migrations, under SQLite's module names and in SQLite's
 * order (identity before the limits, which count its pending requests), then the checkpoints,
 * which SQLite keeps in a file.
 */
export function postgresHouseholdMigrations(
  audit: PostgresTwin<AuditLog> = postgresAuditLog(),
): Readonly<Record<string, readonly Migration[]>> {
  return {
    identity: postgresIdentityMigrations,
    payments: postgresPaymentsMigrations,
    evidence: postgresEvidenceStoreMigrations,
    'mock-rail': postgresMockRailMigrations,
    chat: postgresChatMigrations,
    audit: audit.migrations,
    discovery: postgresDiscoveryStoreMigrations,
    pins: postgresPinStoreMigrations,
    limits: postgresRequestLimitMigrations,
    'call-approvals': postgresCallApprovalMigrations,
    'turn-leases': postgresTurnLeaseMigrations,
    allowances: postgresAllowanceMigrations,
    'audit-checkpoints': postgresCheckpointMigrations,
    'checkpoint-lease': postgresCheckpointLeaseMigrations,
  };
}

/** Options of {@link openPostgresHouseholdStore}. */
export interface PostgresHouseholdStoreOptions {
  /** `postgres://…` or `postgresql://…`; never logged (it may hold a password). */
  readonly url: string;
  /** The audit log's twin; default the real one (a test may give a stand-in). */
  readonly audit?: PostgresTwin<AuditLog>;
}

/**
 * The household's store on a PostgreSQL database several instances share (SPEC §11, issue 28):
 * one pool, every module's migrations applied under the migration lock, and each module's
 * PostgreSQL twin on it, in the same `HouseholdStore` shape as SQLite's. Faults throw
 * `IdentityError('store-failed')` with the server's reason, never the URL.
 */
export async function openPostgresHouseholdStore(options: PostgresHouseholdStoreOptions): Promise<HouseholdStore> {
  const audit = options.audit ?? postgresAuditLog();
  let pool: pg.Pool;
  try {
    pool = await openPostgresPool({
      url: options.url,
      migrations: postgresHouseholdMigrations(audit),
      what: 'household store',
    });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new IdentityError('store-failed', reason, { cause: error });
  }
  const opened = pool;
  // One listener connection for both kinds of approval, while any wait of this instance watches one.
  const decisions = createPostgresDecisionChannel(opened);
  return {
    location: { kind: 'postgres', url: options.url },
    identity: createPostgresIdentityStore(opened, { decisions }),
    payments: createPostgresPaymentStore(opened),
    evidence: createPostgresEvidenceStore(opened, { capacity: evidenceCapacity }),
    mockRail: createPostgresMockRailStore(opened),
    chat: createPostgresChatStore(opened),
    audit: audit.open(opened),
    discovery: createPostgresDiscoveryStore(opened),
    limits: createPostgresRequestLimitStore(opened),
    pins: createPostgresPinStore(opened),
    callApprovals: createPostgresCallApprovalStore(opened, { decisions }),
    turnLeases: createPostgresTurnLeaseStore(opened),
    allowances: createPostgresAllowanceStore(opened),
    checkpoints: createPostgresCheckpointStore(opened),
    checkpointLease: createPostgresCheckpointLeaseStore(opened),
    close: () => {
      void opened.end().catch(() => undefined);
    },
  };
}
