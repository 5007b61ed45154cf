import type Database from 'better-sqlite3';
import {
  type CallApprovalCreation,
  type CallApprovalRecord,
  type CallApprovalStore,
  IdentityError,
} from '../identity/index';
import {
  callApprovalParameters,
  callApprovalColumnNames as columns,
  roleSchema,
  toCallApproval,
} from './identity-rows';

/** How often `create` tries again when the open request it lost to closed before it could read it. */
const createAttempts = 3;

/**
 * Call-approval requests on the household SQLite file (table `call_approvals`, migrated by
 * `lib/store.ts`). Every change a race could double is one statement: a request is inserted only
 * where the partial unique index finds no open request for its call hash (`ON CONFLICT DO
 * NOTHING`), and approvals and decisions are one UPDATE guarded by the status, so the
 * compare-and-set holds across processes sharing the file. Driver faults become
 * `IdentityError('store-failed')` with the cause kept.
 */
export function createSqliteCallApprovalStore(database: Database.Database): CallApprovalStore {
  // One statement counts the waiting requests and inserts below the bound: SQLite's single writer
  // makes it one step for every process on the file. The WHERE also ends the SELECT before ON CONFLICT.
  const insert = database.prepare(
    `INSERT INTO call_approvals (${columns}) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
     WHERE (SELECT count(*) FROM call_approvals WHERE status = 'pending' AND expires_at > ?) < ?
     ON CONFLICT DO NOTHING`,
  );
  const get = database.prepare<[string]>(`SELECT ${columns} FROM call_approvals WHERE request_id = ?`);
  const findOpen = database.prepare<[string]>(
    `SELECT ${columns} FROM call_approvals WHERE call_hash = ? AND status IN ('pending', 'approved')
     ORDER BY created_at DESC, rowid DESC LIMIT 1`,
  );
  const countPending = database.prepare<[number], { count: number }>(
    `SELECT count(*) AS count FROM call_approvals WHERE status = 'pending' AND expires_at > ?`,
  );
  const listPending = database.prepare<[]>(
    `SELECT ${columns} FROM call_approvals WHERE status = 'pending' ORDER BY created_at, rowid`,
  );
  const addApproval = database.prepare(
    `UPDATE call_approvals SET approvals = json_set(approvals, @path, @credential), updated_at = @now
     WHERE request_id = @requestId AND status = 'pending' AND json_type(approvals, @path) IS NULL`,
  );
  const transition = database.prepare(
    `UPDATE call_approvals SET status = @to, updated_at = @now, reason = COALESCE(@reason, reason)
     WHERE request_id = @requestId AND status IN (SELECT value FROM json_each(@from))`,
  );
  const create = (record: CallApprovalRecord, maxPending = Number.MAX_SAFE_INTEGER): CallApprovalCreation => {
    for (let attempt = 0; attempt < createAttempts; attempt += 1) {
      const inserted = insert.run(...callApprovalParameters(record), record.createdAt, maxPending);
      if (inserted.changes === 1) return { record, created: true };
      const open = findOpen.get(record.callHash);
      if (open !== undefined) return { record: toCallApproval(open), created: false };
      if ((countPending.get(record.createdAt)?.count ?? 0) >= maxPending) return { created: false, full: true };
      if (get.get(record.requestId) !== undefined) {
        throw new IdentityError('conflict', `call-approval request id ${record.requestId} is already used`);
      }
      // The open request this insert lost to was closed before it could be read: try again.
    }
    throw new IdentityError('conflict', 'the open request for this call kept changing; ask again');
  };
  return {
    create: (record, options) => guarded('create', () => create(record, options?.maxPending)),
    get: (requestId) =>
      guarded('get', () => {
        const found = get.get(requestId);
        return found === undefined ? undefined : toCallApproval(found);
      }),
    findOpen: (callHash) =>
      guarded('findOpen', () => {
        const found = findOpen.get(callHash);
        return found === undefined ? undefined : toCallApproval(found);
      }),
    listPending: () => guarded('listPending', () => listPending.all().map(toCallApproval)),
    addApproval: (requestId, role, credential, now) =>
      guarded(
        'addApproval',
        () => addApproval.run({ requestId, path: `$.${roleSchema.parse(role)}`, credential, now }).changes === 1,
      ),
    transition: (requestId, change) =>
      guarded(
        'transition',
        () =>
          transition.run({
            requestId,
            from: JSON.stringify(change.from),
            to: change.to,
            now: change.now,
            reason: change.reason ?? null,
          }).changes === 1,
      ),
  };
}

/** Runs one store operation; a driver or decoding fault becomes `store-failed` with its cause. */
async function guarded<T>(operation: string, run: () => T): Promise<T> {
  try {
    return run();
  } catch (error) {
    if (error instanceof IdentityError) throw error;
    throw new IdentityError('store-failed', `call-approval store: ${operation} failed`, { cause: error });
  }
}
