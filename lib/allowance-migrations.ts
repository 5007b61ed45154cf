import type { Migration } from './apply-migrations';

/**
 * The standing allowances' tables (docs/human-authority.md "Standing allowances"): the signed
 * allowances with their revocation, and one hold per order against a period's budget. Append a
 * version to change them; never edit one that has shipped.
 */
export const allowanceMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE allowances (
        allowance_id TEXT PRIMARY KEY,
        child_did TEXT NOT NULL,
        merchant_did TEXT NOT NULL,
        credential TEXT NOT NULL,
        terms TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        revoked_at INTEGER,
        revoked_after_sequence INTEGER
      ) STRICT;
      CREATE INDEX allowances_by_child_merchant ON allowances (child_did, merchant_did, created_at);
      CREATE TABLE allowance_holds (
        sequence INTEGER PRIMARY KEY AUTOINCREMENT,
        invoice_id TEXT NOT NULL UNIQUE,
        allowance_id TEXT NOT NULL REFERENCES allowances (allowance_id),
        period_key TEXT NOT NULL,
        amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
        budget_cents INTEGER NOT NULL CHECK (budget_cents > 0),
        created_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX allowance_holds_by_period ON allowance_holds (allowance_id, period_key);
    `,
  },
];
