import type pg from 'pg';
import {
  type CallApprovalCreation,
  type CallApprovalRecord,
  type CallApprovalStatus,
  type CallApprovalStore,
  IdentityError,
} from '../identity/index';
import { inTransaction, type Migration } from '../proxy/index';
import { callApprovalParameters, optional, roleSchema, toCallApproval } from './identity-rows';
import {
  createPostgresDecisionChannel,
  notifyingDecision,
  type PostgresDecisionChannel,
} from './postgres-decision-channel';

/**
 * The call-approval requests' table on PostgreSQL (docs/human-authority.md, issue 28), module
 * `call-approvals` like SQLite's, with the same columns; times are milliseconds as `BIGINT`, and
 * `position` keeps insertion order where SQLite uses its `rowid`. Version 1 is SQLite's versions 1
 * and 2 together (the partial unique index: one open request per call hash). Append to change;
 * never edit a shipped one.
 */
export const postgresCallApprovalMigrations: readonly Migration[] = [
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
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        position BIGINT GENERATED ALWAYS AS IDENTITY
      );
      CREATE UNIQUE INDEX call_approvals_one_open ON call_approvals (call_hash) WHERE status IN ('pending', 'approved');
      CREATE INDEX call_approvals_by_status ON call_approvals (status, created_at);
    `,
  },
];

// BIGINT columns arrive as strings from node-postgres: every time is selected as float8, so the
// rows decode exactly as SQLite's do.
const columns = `request_id, tool, call, call_hash, required_roles, approvals, status, reason,
  created_at::float8 AS created_at, expires_at::float8 AS expires_at, updated_at::float8 AS updated_at`;

/**
 * The advisory lock key a bounded `create` takes (a constant, so all code versions agree): the
 * ASCII of "emcp-cap" read as a signed 64-bit integer.
 */
const createLockKey = '7308607103741157744';

/** How often `create` tries again when the open request it lost to closed before it could read it. */
const createAttempts = 3;

/**
 * Call-approval requests on a PostgreSQL pool whose owner has applied
 * {@link postgresCallApprovalMigrations} (issue 28): several instances share the requests. Every
 * change a race could double is one statement at `READ COMMITTED`, decided by the row it touches:
 * a request is inserted `ON CONFLICT DO NOTHING`, where the partial unique index on the open
 * requests' call hash decides (a concurrent creator of the same hash waits for the first one's row,
 * then inserts nothing and reads it); adding an approval and deciding are one conditional `UPDATE`
 * (a concurrent writer waits for the row and re-checks the condition on the committed one). Both
 * notify the decisions' channel in the same statement, which `watch` hears (`decisions`: the
 * household's one channel, else one of this store's own). Driver faults become
 * `IdentityError('store-failed')` with the cause kept. The pool is its owner's.
 */
export function createPostgresCallApprovalStore(
  pool: pg.Pool,
  options: { readonly decisions?: PostgresDecisionChannel } = {},
): CallApprovalStore {
  const query = pool.query.bind(pool);
  const decisions = options.decisions ?? createPostgresDecisionChannel(pool);
  const changed = (result: pg.QueryResult) => result.rowCount === 1;
  const findOpen = async (callHash: string) =>
    optional(
      (
        await query(
          `SELECT ${columns} FROM call_approvals WHERE call_hash = $1 AND status IN ('pending', 'approved')
           ORDER BY created_at DESC, position DESC LIMIT 1`,
          [callHash],
        )
      ).rows[0],
      toCallApproval,
    );
  const get = async (requestId: string) =>
    optional(
      (await query(`SELECT ${columns} FROM call_approvals WHERE request_id = $1`, [requestId])).rows[0],
      toCallApproval,
    );
  // Counting the waiting requests and inserting below the bound is one step across instances:
  // under READ COMMITTED two creates would each count 19 of 20 and both insert, so creates take
  // one transaction-level advisory lock, count, and insert, and the next waits for that commit.
  const insertBounded = async (record: CallApprovalRecord, maxPending: number) => {
    const client = await pool.connect();
    try {
      return await inTransaction(client, async () => {
        await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [createLockKey]);
        return client.query(
          `INSERT INTO call_approvals (request_id, tool, call, call_hash, required_roles, approvals, status, reason,
             created_at, expires_at, updated_at)
           SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9::bigint, $10::bigint, $11::bigint
           WHERE (SELECT count(*) FROM call_approvals WHERE status = 'pending' AND expires_at > $9::bigint) < $12
           ON CONFLICT DO NOTHING`,
          [...callApprovalParameters(record), maxPending],
        );
      });
    } finally {
      client.release();
    }
  };
  const countPending = async (now: number) =>
    Number(
      (
        await query<{ count: string }>(
          `SELECT count(*) AS count FROM call_approvals WHERE status = 'pending' AND expires_at > $1`,
          [now],
        )
      ).rows[0]?.count ?? 0,
    );
  const create = async (
    record: CallApprovalRecord,
    maxPending = Number.MAX_SAFE_INTEGER,
  ): Promise<CallApprovalCreation> => {
    for (let attempt = 0; attempt < createAttempts; attempt += 1) {
      if (changed(await insertBounded(record, maxPending))) return { record, created: true };
      // A fresh statement sees the row the insert waited for (READ COMMITTED).
      const open = await findOpen(record.callHash);
      if (open !== undefined) return { record: open, created: false };
      if ((await countPending(record.createdAt)) >= maxPending) return { created: false, full: true };
      if ((await get(record.requestId)) !== undefined) {
        throw new IdentityError('conflict', `call-approval request id ${record.requestId} is already used`);
      }
      // The open request this insert lost to was closed before it could be read: try again.
    }
    throw new IdentityError('conflict', 'the open request for this call kept changing; ask again');
  };

  return {
    create: (record, options) => guarded('create', () => create(record, options?.maxPending)),
    get: (requestId) => guarded('get', () => get(requestId)),
    findOpen: (callHash) => guarded('findOpen', () => findOpen(callHash)),
    listPending: () =>
      guarded('listPending', async () =>
        (
          await query(`SELECT ${columns} FROM call_approvals WHERE status = 'pending' ORDER BY created_at, position`)
        ).rows.map(toCallApproval),
      ),
    // One conditional UPDATE: pending, and no approval of this role yet. Two approvals of one role at
    // once: the second waits for the row and re-checks on the committed one (the role is there).
    addApproval: (requestId, role, credential, now) =>
      guarded('addApproval', async () => {
        const key = roleSchema.parse(role);
        return changed(
          await query(
            notifyingDecision(
              `UPDATE call_approvals SET approvals = jsonb_set(approvals::jsonb, ARRAY[$2::text], to_jsonb($3::text))::text,
                 updated_at = $4
               WHERE request_id = $1 AND status = 'pending' AND NOT (approvals::jsonb ? $2)
               RETURNING request_id AS id`,
            ),
            [requestId, key, credential, now],
          ),
        );
      }),
    // Each change notifies the decisions' channel in its statement, so it goes out at commit.
    watch: (requestId, poke) => decisions.watch(requestId, poke),
    // One UPDATE: the status compare-and-set, with the reason written only by the winner.
    transition: (requestId, change) =>
      guarded('transition', async () => {
        const from: readonly CallApprovalStatus[] = change.from;
        return changed(
          await query(
            notifyingDecision(
              `UPDATE call_approvals SET status = $3, updated_at = $4, reason = COALESCE($5, reason)
               WHERE request_id = $1 AND status = ANY($2::text[])
               RETURNING request_id AS id`,
            ),
            [requestId, [...from], change.to, change.now, change.reason ?? null],
          ),
        );
      }),
  };
}

/** Runs one store operation; a driver or decoding fault becomes `store-failed` with its cause. */
async function guarded<T>(operation: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof IdentityError) throw error;
    throw new IdentityError('store-failed', `call-approval store: ${operation} failed`, { cause: error });
  }
}
