import type pg from 'pg';
import type { ApprovalStatus, IdentityStore } from '../identity/index';
import { IdentityError } from '../identity/index';
import { inTransaction, type Migration } from '../proxy/index';
import {
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
import {
  createPostgresDecisionChannel,
  notifyingDecision,
  type PostgresDecisionChannel,
} from './postgres-decision-channel';

/**
 * The identity module's tables on PostgreSQL (SPEC §5, §11), registered as module `identity` like
 * SQLite's, with the same columns and digests; times are milliseconds since the epoch. Version 1
 * is SQLite's versions 1 and 2 together (its lock table has no twin: PostgreSQL has advisory
 * locks). `position` keeps insertion order where SQLite uses its `rowid`. Append to change; never
 * edit a shipped one.
 */
export const postgresIdentityMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE identity_records (
        kind TEXT NOT NULL CHECK (kind IN ('key', 'private-key', 'did', 'household')),
        id TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (kind, id)
      );

      CREATE TABLE enrollment_codes (
        role TEXT PRIMARY KEY CHECK (role IN ('child', 'parent')),
        code_hash TEXT NOT NULL,
        issued_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        used_at BIGINT
      );

      CREATE TABLE enrollment_failures (
        role TEXT NOT NULL CHECK (role IN ('child', 'parent')),
        at BIGINT NOT NULL,
        source TEXT NOT NULL DEFAULT ''
      );
      CREATE INDEX enrollment_failures_by_role ON enrollment_failures (role, at);
      CREATE INDEX enrollment_failures_by_source ON enrollment_failures (role, source, at);

      CREATE TABLE passkeys (
        credential_id TEXT PRIMARY KEY,
        role TEXT NOT NULL CHECK (role IN ('child', 'parent')),
        member_did TEXT NOT NULL,
        user_handle TEXT NOT NULL,
        public_key_cose TEXT NOT NULL,
        public_key_jwk TEXT NOT NULL,
        counter BIGINT NOT NULL,
        transports TEXT NOT NULL,
        enrollment TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        position BIGINT GENERATED ALWAYS AS IDENTITY
      );
      CREATE INDEX passkeys_by_role ON passkeys (role, created_at);

      CREATE TABLE approval_sessions (
        token_hash TEXT PRIMARY KEY,
        role TEXT NOT NULL CHECK (role IN ('child', 'parent')),
        member_did TEXT NOT NULL,
        credential_id TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
      );
      CREATE INDEX approval_sessions_by_expiry ON approval_sessions (expires_at);

      CREATE TABLE ceremonies (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('registration', 'sign-in', 'approval')),
        challenge TEXT NOT NULL,
        role TEXT CHECK (role IN ('child', 'parent')),
        code_hash TEXT,
        user_handle TEXT,
        approval_id TEXT,
        expires_at BIGINT NOT NULL
      );
      CREATE INDEX ceremonies_by_expiry ON ceremonies (expires_at);

      CREATE TABLE approvals (
        approval_id TEXT PRIMARY KEY,
        invoice_id TEXT NOT NULL UNIQUE,
        invoice TEXT NOT NULL,
        invoice_hash TEXT NOT NULL,
        merchant_did TEXT NOT NULL,
        total_cents BIGINT NOT NULL,
        currency TEXT NOT NULL,
        required_roles TEXT NOT NULL,
        approvals TEXT NOT NULL,
        status TEXT NOT NULL
          CHECK (status IN ('pending', 'approved', 'declined', 'expired', 'settled', 'fulfilled')),
        reason TEXT,
        receipt TEXT,
        commitment TEXT,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        position BIGINT GENERATED ALWAYS AS IDENTITY
      );
      CREATE INDEX approvals_by_status ON approvals (status, created_at);
      CREATE INDEX approvals_by_created ON approvals (created_at);

      CREATE TABLE merchants (
        did TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        public_key_jwk TEXT NOT NULL,
        trusted_at BIGINT NOT NULL,
        position BIGINT GENERATED ALWAYS AS IDENTITY
      );
    `,
  },
  {
    // SQLite's version 4 (issue 29): member names by role, and the household's one time zone.
    version: 2,
    sql: `
      CREATE TABLE member_names (
        role TEXT PRIMARY KEY CHECK (role IN ('child', 'parent')),
        name TEXT NOT NULL,
        set_at BIGINT NOT NULL
      );

      CREATE TABLE household_settings (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        time_zone TEXT NOT NULL,
        set_at BIGINT NOT NULL
      );
    `,
  },
  {
    // SQLite's version 5 (issue 29): the hand-over of an order the allowance no longer covers to the
    // parent; a handed-over request always asks the parent.
    version: 3,
    sql: `
      ALTER TABLE approvals ADD COLUMN handover TEXT,
        ADD CONSTRAINT approvals_handover_check
        CHECK (handover IS NULL OR (handover::jsonb IS NOT NULL AND required_roles::jsonb = '["child","parent"]'::jsonb));
    `,
  },
];

// BIGINT columns arrive as strings from node-postgres: every time is selected as float8, so the
// rows decode exactly as SQLite's do.
const codeColumns = `role, code_hash, issued_at::float8 AS issued_at, expires_at::float8 AS expires_at,
  used_at::float8 AS used_at`;
const passkeyColumns = `credential_id, role, member_did, user_handle, public_key_cose, public_key_jwk,
  counter::float8 AS counter, transports, enrollment, created_at::float8 AS created_at`;
const sessionColumns = `token_hash, role, member_did, credential_id, created_at::float8 AS created_at,
  expires_at::float8 AS expires_at`;
const ceremonyColumns = `id, kind, challenge, role, code_hash, user_handle, approval_id,
  expires_at::float8 AS expires_at`;
const approvalColumns = `approval_id, invoice_id, invoice, invoice_hash, merchant_did,
  total_cents::float8 AS total_cents, currency, required_roles, approvals, status, reason, receipt, commitment,
  created_at::float8 AS created_at, expires_at::float8 AS expires_at, updated_at::float8 AS updated_at, handover`;
const merchantColumns = 'did, name, public_key_jwk, trusted_at::float8 AS trusted_at';

/**
 * The identity store on a PostgreSQL pool whose owner has applied {@link postgresIdentityMigrations}
 * (issue 28): several instances on one database share the household. Every state change a race
 * could double is one statement, decided by the row it touches, at `READ COMMITTED`: a first
 * insert is `ON CONFLICT DO NOTHING` (the key decides), using a code, moving a counter, adding an
 * approval and deciding a request are one conditional `UPDATE` (a concurrent writer waits for the
 * row and re-checks the condition on the row that committed), a challenge is taken by
 * `DELETE … RETURNING`, and a live enrollment code is kept by an upsert whose update is
 * conditional. `exclusive` is a transaction-level advisory lock. Adding an approval and every
 * transition notify the decisions' channel in the same statement, which `approvals.watch` hears
 * (`decisions`: the household's one channel, else one of this store's own). Driver faults become
 * `IdentityError('store-failed')` with the cause kept. The pool is its owner's.
 */
export function createPostgresIdentityStore(
  pool: pg.Pool,
  options: { readonly decisions?: PostgresDecisionChannel } = {},
): IdentityStore {
  const query = pool.query.bind(pool);
  const decisions = options.decisions ?? createPostgresDecisionChannel(pool);
  const changed = (result: pg.QueryResult) => result.rowCount === 1;

  const queued = new Map<string, Promise<void>>();
  /** Runs `work` in a transaction holding the advisory lock of `name`. */
  const underAdvisoryLock = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
    const client = await guarded('records.exclusive', () => pool.connect());
    let broken: Error | undefined;
    try {
      return await inTransaction(client, async () => {
        await guarded('records.exclusive', () =>
          client.query("SELECT pg_advisory_xact_lock(hashtextextended('emcp-identity/' || $1, 0))", [name]),
        );
        return work();
      });
    } catch (error) {
      if (!(error instanceof IdentityError) || error.code === 'store-failed') broken = toError(error);
      throw error;
    } finally {
      client.release(broken);
    }
  };

  return {
    records: {
      get: (kind, id) =>
        guarded('records.get', async () => {
          const found = await query('SELECT id, value FROM identity_records WHERE kind = $1 AND id = $2', [kind, id]);
          return recordRow.optional().parse(found.rows[0])?.value;
        }),
      put: (kind, id, value) =>
        guarded('records.put', async () => {
          await query(
            `INSERT INTO identity_records (kind, id, value) VALUES ($1, $2, $3)
             ON CONFLICT (kind, id) DO UPDATE SET value = excluded.value`,
            [kind, id, value],
          );
        }),
      // The primary key decides the first writer; the loser changes nothing.
      insert: (kind, id, value) =>
        guarded('records.insert', async () =>
          changed(
            await query(
              'INSERT INTO identity_records (kind, id, value) VALUES ($1, $2, $3) ON CONFLICT (kind, id) DO NOTHING',
              [kind, id, value],
            ),
          ),
        ),
      delete: (kind, id) =>
        guarded('records.delete', async () =>
          changed(await query('DELETE FROM identity_records WHERE kind = $1 AND id = $2', [kind, id])),
        ),
      list: (kind) =>
        guarded('records.list', async () => {
          // COLLATE "C" orders ids by their bytes, as SQLite does.
          const found = await query('SELECT id, value FROM identity_records WHERE kind = $1 ORDER BY id COLLATE "C"', [
            kind,
          ]);
          return found.rows.map((row) => {
            const { id, value } = recordRow.parse(row);
            return { id, value };
          });
        }),
      // A transaction-level advisory lock on a hash of the name, held by one checked-out connection
      // while `work` runs on the pool: every instance on the database takes turns, and a holder
      // that dies releases it with its connection. Holders in this process queue here first, so
      // at most one connection of the pool waits per name: waiters holding every connection
      // would leave none for the holder's work.
      exclusive: (name, work) => {
        const run = (queued.get(name) ?? Promise.resolve()).then(() => underAdvisoryLock(name, work));
        queued.set(
          name,
          run.then(
            () => undefined,
            () => undefined,
          ),
        );
        return run;
      },
    },

    enrollment: {
      replaceCode: (record) =>
        guarded('enrollment.replaceCode', async () => {
          await query(
            `INSERT INTO enrollment_codes (role, code_hash, issued_at, expires_at, used_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (role) DO UPDATE SET code_hash = excluded.code_hash, issued_at = excluded.issued_at,
               expires_at = excluded.expires_at, used_at = excluded.used_at`,
            [record.role, record.codeHash, record.issuedAt, record.expiresAt, record.usedAt ?? null],
          );
        }),
      // The update applies only over a used or expired code: an instance starting second finds the
      // first one's live code (waiting for its row if both insert at once) and keeps it.
      issueCode: (record, now) =>
        guarded('enrollment.issueCode', async () =>
          changed(
            await query(
              `INSERT INTO enrollment_codes (role, code_hash, issued_at, expires_at, used_at) VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (role) DO UPDATE SET code_hash = excluded.code_hash, issued_at = excluded.issued_at,
                 expires_at = excluded.expires_at, used_at = excluded.used_at
               WHERE enrollment_codes.used_at IS NOT NULL OR enrollment_codes.expires_at <= $6`,
              [record.role, record.codeHash, record.issuedAt, record.expiresAt, record.usedAt ?? null, now],
            ),
          ),
        ),
      getCode: (role) =>
        guarded('enrollment.getCode', async () =>
          optional(
            (await query(`SELECT ${codeColumns} FROM enrollment_codes WHERE role = $1`, [role])).rows[0],
            toCode,
          ),
        ),
      // One conditional UPDATE: of concurrent uses of one code, the first takes the row lock and
      // sets used_at; the others re-check `used_at IS NULL` on the committed row and change nothing.
      consumeCode: (role, codeHash, now) =>
        guarded('enrollment.consumeCode', async () =>
          changed(
            await query(
              `UPDATE enrollment_codes SET used_at = $3
               WHERE role = $1 AND code_hash = $2 AND used_at IS NULL AND expires_at > $3`,
              [role, codeHash, now],
            ),
          ),
        ),
      addFailure: (role, now, source) =>
        guarded('enrollment.addFailure', async () => {
          await query('INSERT INTO enrollment_failures (role, at, source) VALUES ($1, $2, $3)', [role, now, source]);
        }),
      countFailures: (role, since, source) =>
        guarded('enrollment.countFailures', async () => {
          const found =
            source === undefined
              ? await query('SELECT count(*)::float8 AS count FROM enrollment_failures WHERE role = $1 AND at >= $2', [
                  role,
                  since,
                ])
              : await query(
                  'SELECT count(*)::float8 AS count FROM enrollment_failures WHERE role = $1 AND at >= $2 AND source = $3',
                  [role, since, source],
                );
          return countRow.parse(found.rows[0]).count;
        }),
    },

    passkeys: {
      add: (record) =>
        guarded('passkeys.add', async () => {
          const row = passkeyParameters(record);
          return changed(
            await query(
              `INSERT INTO passkeys (credential_id, role, member_did, user_handle, public_key_cose, public_key_jwk, counter,
                 transports, enrollment, created_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
               ON CONFLICT (credential_id) DO NOTHING`,
              [
                row.credentialId,
                row.role,
                row.memberDid,
                row.userHandle,
                row.publicKeyCose,
                row.publicKeyJwk,
                row.counter,
                row.transports,
                row.enrollment,
                row.createdAt,
              ],
            ),
          );
        }),
      get: (credentialId) =>
        guarded('passkeys.get', async () =>
          optional(
            (await query(`SELECT ${passkeyColumns} FROM passkeys WHERE credential_id = $1`, [credentialId])).rows[0],
            toPasskey,
          ),
        ),
      listByRole: (role) =>
        guarded('passkeys.listByRole', async () =>
          (
            await query(`SELECT ${passkeyColumns} FROM passkeys WHERE role = $1 ORDER BY created_at, position`, [role])
          ).rows.map(toPasskey),
        ),
      // Compare-and-set: only the assertion that read `expected` moves the counter; a concurrent one
      // re-checks against the counter that committed and loses.
      updateCounter: (credentialId, expected, next) =>
        guarded('passkeys.updateCounter', async () =>
          changed(
            await query('UPDATE passkeys SET counter = $3 WHERE credential_id = $1 AND counter = $2', [
              credentialId,
              expected,
              next,
            ]),
          ),
        ),
    },

    sessions: {
      create: (record) =>
        guarded('sessions.create', async () => {
          await query('DELETE FROM approval_sessions WHERE expires_at <= $1', [record.createdAt]);
          await query(
            `INSERT INTO approval_sessions (token_hash, role, member_did, credential_id, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6)`,
            [record.tokenHash, record.role, record.memberDid, record.credentialId, record.createdAt, record.expiresAt],
          );
        }),
      // Read from the table at every request: a session deleted through any instance is gone for all.
      get: (tokenHash) =>
        guarded('sessions.get', async () =>
          optional(
            (await query(`SELECT ${sessionColumns} FROM approval_sessions WHERE token_hash = $1`, [tokenHash])).rows[0],
            toSession,
          ),
        ),
      delete: (tokenHash) =>
        guarded('sessions.delete', async () => {
          await query('DELETE FROM approval_sessions WHERE token_hash = $1', [tokenHash]);
        }),
    },

    ceremonies: {
      put: (record, now) =>
        guarded('ceremonies.put', async () => {
          await query('DELETE FROM ceremonies WHERE expires_at <= $1', [now]);
          await query(
            `INSERT INTO ceremonies (id, kind, challenge, role, code_hash, user_handle, approval_id, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, challenge = excluded.challenge, role = excluded.role,
               code_hash = excluded.code_hash, user_handle = excluded.user_handle, approval_id = excluded.approval_id,
               expires_at = excluded.expires_at`,
            [
              record.id,
              record.kind,
              record.challenge,
              record.role ?? null,
              record.codeHash ?? null,
              record.userHandle ?? null,
              record.approvalId ?? null,
              record.expiresAt,
            ],
          );
        }),
      // DELETE … RETURNING: of concurrent takes, one deletes the row and gets it; the rest find none.
      take: (id) =>
        guarded('ceremonies.take', async () =>
          optional(
            (await query(`DELETE FROM ceremonies WHERE id = $1 RETURNING ${ceremonyColumns}`, [id])).rows[0],
            toCeremony,
          ),
        ),
    },

    approvals: {
      // Insert-or-return-existing: either key's conflict makes the insert do nothing (a concurrent
      // creator of the same invoice waits for the first one's row), and only a conflict on the
      // invoice id has a request to return.
      create: (record) =>
        guarded('approvals.create', async () => {
          const inserted = await query(
            `INSERT INTO approvals (approval_id, invoice_id, invoice, invoice_hash, merchant_did, total_cents, currency,
               required_roles, approvals, status, reason, receipt, commitment, created_at, expires_at, updated_at,
               handover)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
             ON CONFLICT DO NOTHING`,
            [
              record.approvalId,
              record.invoiceId,
              record.invoice,
              record.invoiceHash,
              record.merchantDid,
              record.totalCents,
              record.currency,
              JSON.stringify(record.requiredRoles),
              JSON.stringify(record.approvals),
              record.status,
              record.reason ?? null,
              record.receipt ?? null,
              record.commitment ?? null,
              record.createdAt,
              record.expiresAt,
              record.updatedAt,
              record.handover === undefined ? null : handoverColumn(record.handover),
            ],
          );
          if (changed(inserted)) return { record, created: true };
          const existing = (
            await query(`SELECT ${approvalColumns} FROM approvals WHERE invoice_id = $1`, [record.invoiceId])
          ).rows[0];
          if (existing === undefined) {
            throw new IdentityError('conflict', `approval id ${record.approvalId} is already used by another invoice`);
          }
          return { record: toApproval(existing), created: false };
        }),
      get: (approvalId) =>
        guarded('approvals.get', async () =>
          optional(
            (await query(`SELECT ${approvalColumns} FROM approvals WHERE approval_id = $1`, [approvalId])).rows[0],
            toApproval,
          ),
        ),
      getByInvoice: (invoiceId) =>
        guarded('approvals.getByInvoice', async () =>
          optional(
            (await query(`SELECT ${approvalColumns} FROM approvals WHERE invoice_id = $1`, [invoiceId])).rows[0],
            toApproval,
          ),
        ),
      listPending: () =>
        guarded('approvals.listPending', async () =>
          (
            await query(
              `SELECT ${approvalColumns} FROM approvals WHERE status = 'pending' ORDER BY created_at, position`,
            )
          ).rows.map(toApproval),
        ),
      listRecent: (limit) =>
        guarded('approvals.listRecent', async () => {
          if (!Number.isSafeInteger(limit) || limit < 0) {
            throw new IdentityError('bad-request', `listRecent limit must be a non-negative integer, got ${limit}`);
          }
          return (
            await query(`SELECT ${approvalColumns} FROM approvals ORDER BY created_at DESC, position DESC LIMIT $1`, [
              limit,
            ])
          ).rows.map(toApproval);
        }),
      // Each change notifies the decisions' channel in its statement, so it goes out at commit.
      watch: (approvalId, poke) => decisions.watch(approvalId, poke),
      // One conditional UPDATE: pending, and no approval of this role yet. Two approvals of one role
      // at once: the second waits for the row and re-checks on the committed one (the role is
      // there), so it changes nothing; two roles at once both land, each on the other's row.
      addApproval: (approvalId, role, credential, now) =>
        guarded('approvals.addApproval', async () => {
          const key = roleSchema.parse(role);
          return changed(
            await query(
              notifyingDecision(
                `UPDATE approvals SET approvals = jsonb_set(approvals::jsonb, ARRAY[$2::text], to_jsonb($3::text))::text,
                   updated_at = $4
                 WHERE approval_id = $1 AND status = 'pending' AND NOT (approvals::jsonb ? $2)
                 RETURNING approval_id AS id`,
              ),
              [approvalId, key, credential, now],
            ),
          );
        }),
      // One UPDATE: the status compare-and-set, with the patch applied only by the winner. A
      // concurrent decider re-checks the status on the committed row and loses.
      transition: (approvalId, change) =>
        guarded('approvals.transition', async () => {
          const from: readonly ApprovalStatus[] = change.from;
          return changed(
            await query(
              notifyingDecision(
                `UPDATE approvals SET status = $3, updated_at = $4, reason = COALESCE($5, reason),
                   receipt = COALESCE($6, receipt), commitment = COALESCE($7, commitment)
                 WHERE approval_id = $1 AND status = ANY($2::text[])
                 RETURNING approval_id AS id`,
              ),
              [
                approvalId,
                [...from],
                change.to,
                change.now,
                change.patch?.reason ?? null,
                change.patch?.receipt ?? null,
                change.patch?.commitment ?? null,
              ],
            ),
          );
        }),
      // One conditional UPDATE: approved without the parent's approval, so on the child's alone (an
      // approved request has every role it asks, and a handed-over one asks the parent). A
      // concurrent refusal waits for the row and re-checks on the committed one (now pending, handed
      // over), so it changes nothing; the waiters hear it through the decisions' channel.
      handToParent: (approvalId, handover) =>
        guarded('approvals.handToParent', async () =>
          changed(
            await query(
              notifyingDecision(
                `UPDATE approvals SET status = 'pending', required_roles = '["child","parent"]', handover = $2,
                   updated_at = $3
                 WHERE approval_id = $1 AND status = 'approved' AND NOT (approvals::jsonb ? 'parent')
                 RETURNING approval_id AS id`,
              ),
              [approvalId, handoverColumn(handover), handover.at],
            ),
          ),
        ),
    },

    merchants: {
      // ON CONFLICT DO NOTHING: a pinned key is never replaced, even by the operator re-adding the DID.
      add: (record) =>
        guarded('merchants.add', async () =>
          changed(
            await query(
              `INSERT INTO merchants (did, name, public_key_jwk, trusted_at) VALUES ($1, $2, $3, $4)
               ON CONFLICT (did) DO NOTHING`,
              [record.did, record.name, JSON.stringify(record.publicKeyJwk), record.trustedAt],
            ),
          ),
        ),
      get: (did) =>
        guarded('merchants.get', async () =>
          optional((await query(`SELECT ${merchantColumns} FROM merchants WHERE did = $1`, [did])).rows[0], toMerchant),
        ),
      list: () =>
        guarded('merchants.list', async () =>
          (await query(`SELECT ${merchantColumns} FROM merchants ORDER BY trusted_at, position`)).rows.map(toMerchant),
        ),
      remove: (did) =>
        guarded('merchants.remove', async () => changed(await query('DELETE FROM merchants WHERE did = $1', [did]))),
    },

    profile: {
      names: () =>
        guarded('profile.names', async () =>
          (
            await query('SELECT role, name, set_at::float8 AS set_at FROM member_names ORDER BY role COLLATE "C"')
          ).rows.map(toMemberName),
        ),
      setName: (record) =>
        guarded('profile.setName', async () => {
          await query(
            `INSERT INTO member_names (role, name, set_at) VALUES ($1, $2, $3)
             ON CONFLICT (role) DO UPDATE SET name = excluded.name, set_at = excluded.set_at`,
            [roleSchema.parse(record.role), record.name, record.setAt],
          );
        }),
      timeZone: () =>
        guarded('profile.timeZone', async () =>
          optional(
            (await query('SELECT time_zone, set_at::float8 AS set_at FROM household_settings WHERE id = 1')).rows[0],
            toTimeZone,
          ),
        ),
      setTimeZone: (record) =>
        guarded('profile.setTimeZone', async () => {
          await query(
            `INSERT INTO household_settings (id, time_zone, set_at) VALUES (1, $1, $2)
             ON CONFLICT (id) DO UPDATE SET time_zone = excluded.time_zone, set_at = excluded.set_at`,
            [record.timeZone, record.setAt],
          );
        }),
      // The key decides the first writer: of several instances starting at once, the first zone stays.
      initTimeZone: (record) =>
        guarded('profile.initTimeZone', async () =>
          changed(
            await query(
              `INSERT INTO household_settings (id, time_zone, set_at) VALUES (1, $1, $2)
               ON CONFLICT (id) DO NOTHING`,
              [record.timeZone, record.setAt],
            ),
          ),
        ),
    },
  };
}

/** Runs one store operation; a driver or decoding fault becomes `store-failed` with its cause. */
async function guarded<T>(operation: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof IdentityError) throw error;
    throw new IdentityError('store-failed', `identity store: ${operation} failed`, { cause: error });
  }
}

function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
