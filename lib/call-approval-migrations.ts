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
  {
    // One open request per call hash (issue 28): two instances asked for one call at once open
    // one request. An older duplicate, which `findOpen` never returned, is closed first.
    version: 2,
    sql: `
      UPDATE call_approvals SET status = 'expired', reason = 'replaced by a newer request for the same call'
      WHERE rowid IN (
        SELECT rowid FROM (
          SELECT rowid, row_number() OVER (PARTITION BY call_hash ORDER BY created_at DESC, rowid DESC) AS newer
          FROM call_approvals WHERE status IN ('pending', 'approved')
        ) WHERE newer > 1
      );
      CREATE UNIQUE INDEX call_approvals_one_open ON call_approvals (call_hash) WHERE status IN ('pending', 'approved');
    `,
  },
];
