import type { Migration } from './apply-migrations';

/**
 * The identity module's tables (SPEC §5, §11), oldest first. Append a new version to change them;
 * never edit a version that has shipped, since files already at it will not run it again.
 */
export const identityMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE identity_records (
        kind TEXT NOT NULL CHECK (kind IN ('key', 'private-key', 'did', 'household')),
        id TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (kind, id)
      ) STRICT;

      CREATE TABLE enrollment_codes (
        role TEXT PRIMARY KEY CHECK (role IN ('child', 'parent')),
        code_hash TEXT NOT NULL,
        issued_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        used_at INTEGER
      ) STRICT;

      CREATE TABLE enrollment_failures (
        role TEXT NOT NULL CHECK (role IN ('child', 'parent')),
        at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX enrollment_failures_by_role ON enrollment_failures (role, at);

      CREATE TABLE passkeys (
        credential_id TEXT PRIMARY KEY,
        role TEXT NOT NULL CHECK (role IN ('child', 'parent')),
        member_did TEXT NOT NULL,
        user_handle TEXT NOT NULL,
        public_key_cose TEXT NOT NULL,
        public_key_jwk TEXT NOT NULL,
        counter INTEGER NOT NULL,
        transports TEXT NOT NULL,
        enrollment TEXT NOT NULL,
        created_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX passkeys_by_role ON passkeys (role, created_at);

      CREATE TABLE approval_sessions (
        token_hash TEXT PRIMARY KEY,
        role TEXT NOT NULL CHECK (role IN ('child', 'parent')),
        member_did TEXT NOT NULL,
        credential_id TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      ) STRICT;

      CREATE TABLE ceremonies (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('registration', 'sign-in', 'approval')),
        challenge TEXT NOT NULL,
        role TEXT CHECK (role IN ('child', 'parent')),
        code_hash TEXT,
        user_handle TEXT,
        approval_id TEXT,
        expires_at INTEGER NOT NULL
      ) STRICT;

      CREATE TABLE approvals (
        approval_id TEXT PRIMARY KEY,
        invoice_id TEXT NOT NULL UNIQUE,
        invoice TEXT NOT NULL,
        invoice_hash TEXT NOT NULL,
        merchant_did TEXT NOT NULL,
        total_cents INTEGER NOT NULL,
        currency TEXT NOT NULL,
        required_roles TEXT NOT NULL,
        approvals TEXT NOT NULL,
        status TEXT NOT NULL
          CHECK (status IN ('pending', 'approved', 'declined', 'expired', 'settled', 'fulfilled')),
        reason TEXT,
        receipt TEXT,
        commitment TEXT,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX approvals_by_status ON approvals (status, created_at);
      CREATE INDEX approvals_by_created ON approvals (created_at);

      CREATE TABLE merchants (
        did TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        public_key_jwk TEXT NOT NULL,
        trusted_at INTEGER NOT NULL
      ) STRICT;
    `,
  },
  {
    // Issue 26 item 12: wrong enrollment codes are throttled per approval-window session, under a
    // ceiling per role; rows from before carry no source and count only towards the ceiling.
    version: 2,
    sql: `
      ALTER TABLE enrollment_failures ADD COLUMN source TEXT NOT NULL DEFAULT '';
      CREATE INDEX enrollment_failures_by_source ON enrollment_failures (role, source, at);
    `,
  },
  {
    // Issue 28: household creation runs under a store-wide lock. SQLite has no advisory locks, so a
    // lock is a row with a lease: a crashed holder's row is taken over once its lease ran out.
    version: 3,
    sql: `
      CREATE TABLE identity_locks (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        expires_at INTEGER NOT NULL
      ) STRICT;
    `,
  },
  {
    // Issue 29: the household's names for its members (set from the parent's window), one per
    // role, and its time zone (one row), which an allowance's day or week is counted in.
    version: 4,
    sql: `
      CREATE TABLE member_names (
        role TEXT PRIMARY KEY CHECK (role IN ('child', 'parent')),
        name TEXT NOT NULL,
        set_at INTEGER NOT NULL
      ) STRICT;

      CREATE TABLE household_settings (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        time_zone TEXT NOT NULL,
        set_at INTEGER NOT NULL
      ) STRICT;
    `,
  },
  {
    // Issue 29: an order approved on the parent's standing allowance alone that the charge then found
    // the allowance no longer covers is handed to the parent; the hand-over (why, which allowance,
    // when) is kept on the request, and a handed-over request always asks the parent.
    version: 5,
    sql: `
      ALTER TABLE approvals ADD COLUMN handover TEXT
        CHECK (handover IS NULL OR (json_valid(handover) AND required_roles = '["child","parent"]'));
    `,
  },
];
