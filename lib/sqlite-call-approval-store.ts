import type Database from 'better-sqlite3';
import { z } from 'zod';
import {
  type CallApprovalRecord,
  type CallApprovalStatus,
  type CallApprovalStore,
  IdentityError,
} from '../identity/index';
import { jsonColumn, roleSchema } from './identity-rows';

const statusSchema = z.enum([
  'pending',
  'approved',
  'declined',
  'expired',
  'used',
]) satisfies z.ZodType<CallApprovalStatus>;

const row = z.object({
  request_id: z.string(),
  tool: z.string(),
  call: z.string(),
  call_hash: z.string(),
  required_roles: jsonColumn(z.array(roleSchema)),
  approvals: jsonColumn(z.partialRecord(roleSchema, z.string())),
  status: statusSchema,
  reason: z.string().nullable(),
  created_at: z.number(),
  expires_at: z.number(),
  updated_at: z.number(),
});

function toRecord(raw: unknown): CallApprovalRecord {
  const parsed = row.parse(raw);
  return {
    requestId: parsed.request_id,
    tool: parsed.tool,
    call: parsed.call,
    callHash: parsed.call_hash,
    requiredRoles: parsed.required_roles,
    approvals: parsed.approvals,
    status: parsed.status,
    ...(parsed.reason === null ? {} : { reason: parsed.reason }),
    createdAt: parsed.created_at,
    expiresAt: parsed.expires_at,
    updatedAt: parsed.updated_at,
  };
}

/**
 * Call-approval requests on the household SQLite file (table `call_approvals`, migrated by
 * `lib/store.ts`). Every change a race could double is one UPDATE guarded by the status, so the
 * compare-and-set holds across processes sharing the file. Driver faults become
 * `IdentityError('store-failed')` with the cause kept.
 */
export function createSqliteCallApprovalStore(database: Database.Database): CallApprovalStore {
  const columns =
    'request_id, tool, call, call_hash, required_roles, approvals, status, reason, created_at, expires_at, updated_at';
  const insert = database.prepare(
    `INSERT INTO call_approvals (${columns})
     VALUES (@requestId, @tool, @call, @callHash, @requiredRoles, @approvals, @status, @reason, @createdAt, @expiresAt, @updatedAt)`,
  );
  const get = database.prepare<[string]>(`SELECT ${columns} FROM call_approvals WHERE request_id = ?`);
  const findOpen = database.prepare<[string]>(
    `SELECT ${columns} FROM call_approvals WHERE call_hash = ? AND status IN ('pending', 'approved')
     ORDER BY created_at DESC, rowid DESC LIMIT 1`,
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
  return {
    create: (record) =>
      guarded('create', () => {
        insert.run({
          requestId: record.requestId,
          tool: record.tool,
          call: record.call,
          callHash: record.callHash,
          requiredRoles: JSON.stringify(record.requiredRoles),
          approvals: JSON.stringify(record.approvals),
          status: record.status,
          reason: record.reason ?? null,
          createdAt: record.createdAt,
          expiresAt: record.expiresAt,
          updatedAt: record.updatedAt,
        });
      }),
    get: (requestId) =>
      guarded('get', () => {
        const found = get.get(requestId);
        return found === undefined ? undefined : toRecord(found);
      }),
    findOpen: (callHash) =>
      guarded('findOpen', () => {
        const found = findOpen.get(callHash);
        return found === undefined ? undefined : toRecord(found);
      }),
    listPending: () => guarded('listPending', () => listPending.all().map(toRecord)),
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
