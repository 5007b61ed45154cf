import type pg from 'pg';
import type { Migration } from '../apply-migrations';
import type { CheckpointStore } from './checkpoint-store';
import { parseJson } from './parse-json';

/**
 * The checkpoints table on PostgreSQL (SPEC §8, §11), registered as module `audit-checkpoints`.
 * Each entry is kept as the JSON text it was given, like a line of the file store, so a damaged
 * entry is named by its position rather than lost. Triggers refuse `UPDATE`, `DELETE` and
 * `TRUNCATE`: the table is append-only for every role that does not drop them. That guards
 * against mistakes, not against whoever owns the database, which is why the witness stays
 * outside it. Append to change; never edit a shipped one.
 */
export const postgresCheckpointMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE audit_checkpoints (
      id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      entry TEXT NOT NULL
    );
    CREATE FUNCTION audit_checkpoints_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'audit checkpoints are append-only: % refused', TG_OP;
    END
    $$;
    CREATE TRIGGER audit_checkpoints_keep_rows BEFORE UPDATE OR DELETE ON audit_checkpoints
      FOR EACH ROW EXECUTE FUNCTION audit_checkpoints_append_only();
    CREATE TRIGGER audit_checkpoints_keep_table BEFORE TRUNCATE ON audit_checkpoints
      FOR EACH STATEMENT EXECUTE FUNCTION audit_checkpoints_append_only();`,
  },
];

/**
 * The checkpoint store on a pool whose owner has applied {@link postgresCheckpointMigrations},
 * shared by every instance of the household. An append is one `INSERT`, durable when it resolves
 * (committed); entries come back in id order, oldest first. Checkpoints are written by whichever
 * instance holds the checkpoint lease, one at a time, so that order is the order they were signed.
 */
export function createPostgresCheckpointStore(pool: pg.Pool): CheckpointStore {
  const entries = async (order: 'ASC' | 'DESC', limit: string) => {
    const rows = await pool.query<{ entry: string }>(
      `SELECT entry FROM audit_checkpoints ORDER BY id ${order}${limit}`,
    );
    // A tamperer may have written any text: what is not JSON comes back as undefined, in its place.
    return rows.rows.map((row) => parseJson(row.entry));
  };
  return {
    async append(checkpoint) {
      await pool.query('INSERT INTO audit_checkpoints (entry) VALUES ($1)', [JSON.stringify(checkpoint)]);
    },
    entries: () => entries('ASC', ''),
    async newest() {
      return (await entries('DESC', ' LIMIT 1'))[0];
    },
  };
}
