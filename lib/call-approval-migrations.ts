import type { Migration } from './apply-migrations';

/**
 * The call-approval requests' table (docs/human-authority.md "`approval_required`"): its own
 * module, apart from the invoice-centric `approvals`. Append a version to change it; never edit
 * one that has shipped.
 */
export const callApprovalMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE call_approvals (
        request_id TEXT PRIMARY KEY,
        tool TEXT NOT NULL,
        call TEXT NOT NULL,
        call_hash TEXT NOT NULL,
        required_roles TEXT NOT NULL,
        approvals TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'declined', 'expired', 'used')),
        reason TEXT,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX call_approvals_by_hash ON call_approvals (call_hash, status, created_at);
      CREATE INDEX call_approvals_by_status ON call_approvals (status, created_at);
    `,
  },
];
