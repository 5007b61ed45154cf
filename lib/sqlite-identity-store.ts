import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import type { ApprovalRecord, ApprovalStatus, IdentityStore } from '../identity/index';
import { IdentityError } from '../identity/index';
import {
  approvalParameters,
  countRow,
  handoverColumn,
  optional,
  passkeyParameters,
  recordRow,
  roleSchema,
  toApproval,
  toCeremony,
  toCode,
  toMemberName,
  toMerchant,
  toPasskey,
  toSession,
  toTimeZone,
} from './identity-rows';

/**
 * The identity store on the household SQLite file, over tables the `identity` migrations created.
 * Every state change a race could double is one SQL statement or one `BEGIN IMMEDIATE`
 * transaction, so the compare-and-set holds across processes sharing the file, not just within
 * this one. Driver faults become `IdentityError('store-failed')` with the cause kept.
 */
export function createSqliteIdentityStore(database: Database.Database): IdentityStore {
  const statements = prepareStatements(database);

  // Insert-or-return-existing, as one transaction so two creators of one invoice get one request. The
  // insert yields to any uniqueness conflict; only a conflict on the invoice id has a request to return.
  const createApproval = database.transaction((record: ApprovalRecord) => {
    const inserted = statements.insertApproval.run(approvalParameters(record)).changes === 1;
    if (inserted) return { record, created: true };
    const existing = statements.getApprovalByInvoice.get(record.invoiceId);
    if (existing === undefined) {
      throw new IdentityError('conflict', `approval id ${record.approvalId} is already used by another invoice`);
    }
    return { record: toApproval(existing), created: false };
  });

  // A lock is a row with a lease (SQLite has no advisory locks): taking it is one upsert that
  // succeeds only over a free or expired row, so every connection to the file, in any process,
  // takes turns. A waiter retries on a timer rather than blocking the event loop in SQLite's busy
  // handler, which would also stall the holder when both share this process.
  const exclusive = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
    const holder = randomUUID();
    for (let wait = 2; ; wait = Math.min(wait * 2, 100)) {
      const now = Date.now();
      const taken = await guarded(
        'records.exclusive',
        () => statements.takeLock.run({ name, holder, now, expiresAt: now + lockLeaseMs }).changes === 1,
      );
      if (taken) break;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
    try {
      return await work();
    } finally {
      await guarded('records.exclusive', () => statements.releaseLock.run(name, holder));
    }
  };

  return {
    records: {
      get: (kind, id) =>
        guarded('records.get', () => recordRow.optional().parse(statements.getRecord.get(kind, id))?.value),
      put: (kind, id, value) =>
        guarded('records.put', () => {
          statements.putRecord.run(kind, id, value);
        }),
      insert: (kind, id, value) =>
        guarded('records.insert', () => statements.insertRecord.run(kind, id, value).changes === 1),
      delete: (kind, id) => guarded('records.delete', () => statements.deleteRecord.run(kind, id).changes === 1),
      exclusive: (name, work) => exclusive(name, work),
      list: (kind) =>
        guarded('records.list', () =>
          statements.listRecords.all(kind).map((row) => {
            const { id, value } = recordRow.parse(row);
            return { id, value };
          }),
        ),
    },

    enrollment: {
      replaceCode: (record) =>
        guarded('enrollment.replaceCode', () => {
          statements.replaceCode.run({
            role: record.role,
            codeHash: record.codeHash,
            issuedAt: record.issuedAt,
            expiresAt: record.expiresAt,
            usedAt: record.usedAt ?? null,
          });
        }),
      // One upsert whose update applies only over a used or expired code: the check and the write are one statement.
      issueCode: (record, now) =>
        guarded(
          'enrollment.issueCode',
          () =>
            statements.issueCode.run({
              role: record.role,
              codeHash: record.codeHash,
              issuedAt: record.issuedAt,
              expiresAt: record.expiresAt,
              usedAt: record.usedAt ?? null,
              now,
            }).changes === 1,
        ),
      getCode: (role) => guarded('enrollment.getCode', () => optional(statements.getCode.get(role), toCode)),
      // One UPDATE: the hash, unused and unexpired are checked and the code spent under one write lock.
      consumeCode: (role, codeHash, now) =>
        guarded('enrollment.consumeCode', () => statements.consumeCode.run({ role, codeHash, now }).changes === 1),
      addFailure: (role, now, source) =>
        guarded('enrollment.addFailure', () => {
          statements.addFailure.run(role, now, source);
        }),
      countFailures: (role, since, source) =>
        guarded('enrollment.countFailures', () =>
          source === undefined
            ? countRow.parse(statements.countFailures.get(role, since)).count
            : countRow.parse(statements.countSourceFailures.get(role, since, source)).count,
        ),
    },

    passkeys: {
      add: (record) =>
        guarded('passkeys.add', () => statements.addPasskey.run(passkeyParameters(record)).changes === 1),
      get: (credentialId) =>
        guarded('passkeys.get', () => optional(statements.getPasskey.get(credentialId), toPasskey)),
      listByRole: (role) => guarded('passkeys.listByRole', () => statements.listPasskeys.all(role).map(toPasskey)),
      // Compare-and-set: only the assertion that read `expected` may move the counter.
      updateCounter: (credentialId, expected, next) =>
        guarded(
          'passkeys.updateCounter',
          () => statements.updateCounter.run({ credentialId, expected, next }).changes === 1,
        ),
    },

    sessions: {
      create: (record) =>
        guarded('sessions.create', () => {
          statements.purgeSessions.run(record.createdAt);
          statements.createSession.run({
            tokenHash: record.tokenHash,
            role: record.role,
            memberDid: record.memberDid,
            credentialId: record.credentialId,
            createdAt: record.createdAt,
            expiresAt: record.expiresAt,
          });
        }),
      get: (tokenHash) => guarded('sessions.get', () => optional(statements.getSession.get(tokenHash), toSession)),
      delete: (tokenHash) =>
        guarded('sessions.delete', () => {
          statements.deleteSession.run(tokenHash);
        }),
    },

    ceremonies: {
      put: (record, now) =>
        guarded('ceremonies.put', () => {
          statements.purgeCeremonies.run(now);
          statements.putCeremony.run({
            id: record.id,
            kind: record.kind,
            challenge: record.challenge,
            role: record.role ?? null,
            codeHash: record.codeHash ?? null,
            userHandle: record.userHandle ?? null,
            approvalId: record.approvalId ?? null,
            expiresAt: record.expiresAt,
          });
        }),
      // DELETE … RETURNING reads and removes in one statement: a challenge is handed out once.
      take: (id) => guarded('ceremonies.take', () => optional(statements.takeCeremony.get(id), toCeremony)),
    },

    approvals: {
      create: (record) => guarded('approvals.create', () => createApproval.immediate(record)),
      get: (approvalId) => guarded('approvals.get', () => optional(statements.getApproval.get(approvalId), toApproval)),
      getByInvoice: (invoiceId) =>
        guarded('approvals.getByInvoice', () => optional(statements.getApprovalByInvoice.get(invoiceId), toApproval)),
      listPending: () => guarded('approvals.listPending', () => statements.listPending.all().map(toApproval)),
      listRecent: (limit) =>
        guarded('approvals.listRecent', () => {
          // SQLite reads a negative LIMIT as "no limit"; refuse it rather than return everything.
          if (!Number.isSafeInteger(limit) || limit < 0) {
            throw new IdentityError('bad-request', `listRecent limit must be a non-negative integer, got ${limit}`);
          }
          return statements.listRecent.all(limit).map(toApproval);
        }),
      // One UPDATE: pending, and no approval of this role yet, checked and written under one write lock.
      addApproval: (approvalId, role, credential, now) =>
        guarded('approvals.addApproval', () => {
          const path = `$.${roleSchema.parse(role)}`;
          return statements.addApproval.run({ approvalId, path, credential, now }).changes === 1;
        }),
      // One UPDATE: the status compare-and-set, with the patch applied only by the winner.
      transition: (approvalId, change) =>
        guarded('approvals.transition', () => {
          const from: readonly ApprovalStatus[] = change.from;
          return (
            statements.transition.run({
              approvalId,
              from: JSON.stringify(from),
              to: change.to,
              now: change.now,
              reason: change.patch?.reason ?? null,
              receipt: change.patch?.receipt ?? null,
              commitment: change.patch?.commitment ?? null,
            }).changes === 1
          );
        }),
      // One UPDATE: approved without the parent's approval (so on the child's alone, and never handed
      // over: a handed-over request asks the parent), checked and moved under one write lock, so of
      // racing refusals one hands it over.
      handToParent: (approvalId, handover) =>
        guarded(
          'approvals.handToParent',
          () =>
            statements.handToParent.run({ approvalId, handover: handoverColumn(handover), now: handover.at })
              .changes === 1,
        ),
    },

    merchants: {
      // ON CONFLICT DO NOTHING: a pinned key is never replaced, even by the operator re-adding the DID.
      add: (record) =>
        guarded(
          'merchants.add',
          () =>
            statements.addMerchant.run({
              did: record.did,
              name: record.name,
              publicKeyJwk: JSON.stringify(record.publicKeyJwk),
              trustedAt: record.trustedAt,
            }).changes === 1,
        ),
      get: (did) => guarded('merchants.get', () => optional(statements.getMerchant.get(did), toMerchant)),
      list: () => guarded('merchants.list', () => statements.listMerchants.all().map(toMerchant)),
      remove: (did) => guarded('merchants.remove', () => statements.removeMerchant.run(did).changes === 1),
    },

    profile: {
      names: () => guarded('profile.names', () => statements.listNames.all().map(toMemberName)),
      setName: (record) =>
        guarded('profile.setName', () => {
          statements.setName.run({ role: roleSchema.parse(record.role), name: record.name, setAt: record.setAt });
        }),
      timeZone: () => guarded('profile.timeZone', () => optional(statements.getTimeZone.get(), toTimeZone)),
      setTimeZone: (record) =>
        guarded('profile.setTimeZone', () => {
          statements.setTimeZone.run({ timeZone: record.timeZone, setAt: record.setAt });
        }),
      // ON CONFLICT DO NOTHING: of two first starts at once, the first zone stays.
      initTimeZone: (record) =>
        guarded(
          'profile.initTimeZone',
          () => statements.initTimeZone.run({ timeZone: record.timeZone, setAt: record.setAt }).changes === 1,
        ),
    },
  };
}

/** How long a SQLite lock holds before another connection may take it over (a crashed holder frees it then). */
const lockLeaseMs = 60_000;

/** Every statement, prepared once against the migrated schema. */
function prepareStatements(database: Database.Database) {
  const approvalColumns = `approval_id, invoice_id, invoice, invoice_hash, merchant_did, total_cents, currency,
    required_roles, approvals, status, reason, receipt, commitment, created_at, expires_at, updated_at, handover`;
  return {
    getRecord: database.prepare<[string, string]>('SELECT id, value FROM identity_records WHERE kind = ? AND id = ?'),
    putRecord: database.prepare<[string, string, string]>(
      `INSERT INTO identity_records (kind, id, value) VALUES (?, ?, ?)
       ON CONFLICT (kind, id) DO UPDATE SET value = excluded.value`,
    ),
    insertRecord: database.prepare<[string, string, string]>(
      'INSERT INTO identity_records (kind, id, value) VALUES (?, ?, ?) ON CONFLICT (kind, id) DO NOTHING',
    ),
    takeLock: database.prepare(
      `INSERT INTO identity_locks (name, holder, expires_at) VALUES (@name, @holder, @expiresAt)
       ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
       WHERE identity_locks.expires_at <= @now`,
    ),
    releaseLock: database.prepare<[string, string]>('DELETE FROM identity_locks WHERE name = ? AND holder = ?'),
    deleteRecord: database.prepare<[string, string]>('DELETE FROM identity_records WHERE kind = ? AND id = ?'),
    listRecords: database.prepare<[string]>('SELECT id, value FROM identity_records WHERE kind = ? ORDER BY id'),

    replaceCode: database.prepare(
      `INSERT INTO enrollment_codes (role, code_hash, issued_at, expires_at, used_at)
       VALUES (@role, @codeHash, @issuedAt, @expiresAt, @usedAt)
       ON CONFLICT (role) DO UPDATE SET code_hash = excluded.code_hash, issued_at = excluded.issued_at,
         expires_at = excluded.expires_at, used_at = excluded.used_at`,
    ),
    issueCode: database.prepare(
      `INSERT INTO enrollment_codes (role, code_hash, issued_at, expires_at, used_at)
       VALUES (@role, @codeHash, @issuedAt, @expiresAt, @usedAt)
       ON CONFLICT (role) DO UPDATE SET code_hash = excluded.code_hash, issued_at = excluded.issued_at,
         expires_at = excluded.expires_at, used_at = excluded.used_at
       WHERE enrollment_codes.used_at IS NOT NULL OR enrollment_codes.expires_at <= @now`,
    ),
    getCode: database.prepare<[string]>('SELECT * FROM enrollment_codes WHERE role = ?'),
    consumeCode: database.prepare(
      `UPDATE enrollment_codes SET used_at = @now
       WHERE role = @role AND code_hash = @codeHash AND used_at IS NULL AND expires_at > @now`,
    ),
    addFailure: database.prepare<[string, number, string]>(
      'INSERT INTO enrollment_failures (role, at, source) VALUES (?, ?, ?)',
    ),
    countFailures: database.prepare<[string, number]>(
      'SELECT COUNT(*) AS count FROM enrollment_failures WHERE role = ? AND at >= ?',
    ),
    countSourceFailures: database.prepare<[string, number, string]>(
      'SELECT COUNT(*) AS count FROM enrollment_failures WHERE role = ? AND at >= ? AND source = ?',
    ),

    addPasskey: database.prepare(
      `INSERT INTO passkeys (credential_id, role, member_did, user_handle, public_key_cose, public_key_jwk, counter,
         transports, enrollment, created_at)
       VALUES (@credentialId, @role, @memberDid, @userHandle, @publicKeyCose, @publicKeyJwk, @counter, @transports,
         @enrollment, @createdAt)
       ON CONFLICT (credential_id) DO NOTHING`,
    ),
    getPasskey: database.prepare<[string]>('SELECT * FROM passkeys WHERE credential_id = ?'),
    listPasskeys: database.prepare<[string]>('SELECT * FROM passkeys WHERE role = ? ORDER BY created_at, rowid'),
    updateCounter: database.prepare(
      'UPDATE passkeys SET counter = @next WHERE credential_id = @credentialId AND counter = @expected',
    ),

    createSession: database.prepare(
      `INSERT INTO approval_sessions (token_hash, role, member_did, credential_id, created_at, expires_at)
       VALUES (@tokenHash, @role, @memberDid, @credentialId, @createdAt, @expiresAt)`,
    ),
    getSession: database.prepare<[string]>('SELECT * FROM approval_sessions WHERE token_hash = ?'),
    purgeSessions: database.prepare<[number]>('DELETE FROM approval_sessions WHERE expires_at <= ?'),
    purgeCeremonies: database.prepare<[number]>('DELETE FROM ceremonies WHERE expires_at <= ?'),
    deleteSession: database.prepare<[string]>('DELETE FROM approval_sessions WHERE token_hash = ?'),

    putCeremony: database.prepare(
      `INSERT INTO ceremonies (id, kind, challenge, role, code_hash, user_handle, approval_id, expires_at)
       VALUES (@id, @kind, @challenge, @role, @codeHash, @userHandle, @approvalId, @expiresAt)
       ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, challenge = excluded.challenge, role = excluded.role,
         code_hash = excluded.code_hash, user_handle = excluded.user_handle, approval_id = excluded.approval_id,
         expires_at = excluded.expires_at`,
    ),
    takeCeremony: database.prepare<[string]>('DELETE FROM ceremonies WHERE id = ? RETURNING *'),

    insertApproval: database.prepare(
      `INSERT INTO approvals (${approvalColumns})
       VALUES (@approvalId, @invoiceId, @invoice, @invoiceHash, @merchantDid, @totalCents, @currency, @requiredRoles,
         @approvals, @status, @reason, @receipt, @commitment, @createdAt, @expiresAt, @updatedAt, @handover)
       ON CONFLICT DO NOTHING`,
    ),
    getApproval: database.prepare<[string]>(`SELECT ${approvalColumns} FROM approvals WHERE approval_id = ?`),
    getApprovalByInvoice: database.prepare<[string]>(`SELECT ${approvalColumns} FROM approvals WHERE invoice_id = ?`),
    listPending: database.prepare<[]>(
      `SELECT ${approvalColumns} FROM approvals WHERE status = 'pending' ORDER BY created_at, rowid`,
    ),
    listRecent: database.prepare<[number]>(
      `SELECT ${approvalColumns} FROM approvals ORDER BY created_at DESC, rowid DESC LIMIT ?`,
    ),
    addApproval: database.prepare(
      `UPDATE approvals SET approvals = json_set(approvals, @path, @credential), updated_at = @now
       WHERE approval_id = @approvalId AND status = 'pending' AND json_type(approvals, @path) IS NULL`,
    ),
    transition: database.prepare(
      `UPDATE approvals SET status = @to, updated_at = @now, reason = COALESCE(@reason, reason),
         receipt = COALESCE(@receipt, receipt), commitment = COALESCE(@commitment, commitment)
       WHERE approval_id = @approvalId AND status IN (SELECT value FROM json_each(@from))`,
    ),
    handToParent: database.prepare(
      `UPDATE approvals SET status = 'pending', required_roles = '["child","parent"]', handover = @handover,
         updated_at = @now
       WHERE approval_id = @approvalId AND status = 'approved' AND json_type(approvals, '$.parent') IS NULL`,
    ),

    addMerchant: database.prepare(
      `INSERT INTO merchants (did, name, public_key_jwk, trusted_at) VALUES (@did, @name, @publicKeyJwk, @trustedAt)
       ON CONFLICT (did) DO NOTHING`,
    ),
    getMerchant: database.prepare<[string]>('SELECT * FROM merchants WHERE did = ?'),
    listMerchants: database.prepare<[]>('SELECT * FROM merchants ORDER BY trusted_at, rowid'),
    removeMerchant: database.prepare<[string]>('DELETE FROM merchants WHERE did = ?'),

    listNames: database.prepare<[]>('SELECT role, name, set_at FROM member_names ORDER BY role'),
    setName: database.prepare(
      `INSERT INTO member_names (role, name, set_at) VALUES (@role, @name, @setAt)
       ON CONFLICT (role) DO UPDATE SET name = excluded.name, set_at = excluded.set_at`,
    ),
    getTimeZone: database.prepare<[]>('SELECT time_zone, set_at FROM household_settings WHERE id = 1'),
    setTimeZone: database.prepare(
      `INSERT INTO household_settings (id, time_zone, set_at) VALUES (1, @timeZone, @setAt)
       ON CONFLICT (id) DO UPDATE SET time_zone = excluded.time_zone, set_at = excluded.set_at`,
    ),
    initTimeZone: database.prepare(
      `INSERT INTO household_settings (id, time_zone, set_at) VALUES (1, @timeZone, @setAt)
       ON CONFLICT (id) DO NOTHING`,
    ),
  };
}

/** Runs one store operation; a driver or decoding fault becomes `store-failed` with its cause. */
async function guarded<T>(operation: string, run: () => T): Promise<T> {
  try {
    return run();
  } catch (error) {
    if (error instanceof IdentityError) throw error;
    throw new IdentityError('store-failed', `identity store: ${operation} failed`, { cause: error });
  }
}
