import type { Migration } from '../apply-migrations';

/**
 * The audit module's table (registered in `lib/store.ts`): one row per household event, chained by
 * hashes (SPEC §8). `event` holds the event's canonical JSON bytes; the filter columns are derived
 * from it (generated, never written), so they cannot disagree with what the hash covers. Triggers
 * refuse UPDATE and DELETE and an INSERT that does not continue the chain: they stop app bugs and
 * accidents. A tamperer with the file can drop them; the chain and the signed checkpoints catch that.
 */
export const auditMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE audit_log (
      id INTEGER PRIMARY KEY CHECK (id >= 1),
      event TEXT NOT NULL,
      prev_hash TEXT NOT NULL CHECK (length(prev_hash) = 64),
      hash TEXT NOT NULL CHECK (length(hash) = 64),
      kind TEXT GENERATED ALWAYS AS (json_extract(event, '$.kind')) VIRTUAL,
      outcome TEXT GENERATED ALWAYS AS (json_extract(event, '$.outcome')) VIRTUAL,
      session TEXT GENERATED ALWAYS AS (json_extract(event, '$.session')) VIRTUAL,
      order_id TEXT GENERATED ALWAYS AS (json_extract(event, '$.orderId')) VIRTUAL
    ) STRICT;
    CREATE INDEX audit_log_session ON audit_log (session, id);
    CREATE INDEX audit_log_order ON audit_log (order_id, id);
    CREATE TRIGGER audit_log_append_only_update BEFORE UPDATE ON audit_log
    BEGIN
      SELECT RAISE(ABORT, 'the audit log is append-only: a row cannot be changed');
    END;
    CREATE TRIGGER audit_log_append_only_delete BEFORE DELETE ON audit_log
    BEGIN
      SELECT RAISE(ABORT, 'the audit log is append-only: a row cannot be deleted');
    END;
    CREATE TRIGGER audit_log_append_in_order BEFORE INSERT ON audit_log
    WHEN NEW.id IS NOT (SELECT COALESCE(MAX(id), 0) + 1 FROM audit_log)
    BEGIN
      SELECT RAISE(ABORT, 'the audit log is append-only: a row must take the next id');
    END;`,
  },
];
