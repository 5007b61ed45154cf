import type Database from 'better-sqlite3';
import { z } from 'zod';
import { type AllowanceRecord, type AllowanceStore, IdentityError } from '../identity/index';

const allowanceRow = z.object({
  allowance_id: z.string(),
  child_did: z.string(),
  merchant_did: z.string(),
  credential: z.string(),
  terms: z.string(),
  created_at: z.number(),
  expires_at: z.number(),
  revoked_at: z.number().nullable(),
  revoked_after_sequence: z.number().nullable(),
});

const holdRow = z.object({
  sequence: z.number(),
  invoice_id: z.string(),
  allowance_id: z.string(),
  period_key: z.string(),
  amount_cents: z.number(),
  budget_cents: z.number(),
  created_at: z.number(),
});

const sumRow = z.object({ spent: z.number() });

function toRecord(raw: unknown): AllowanceRecord {
  const row = allowanceRow.parse(raw);
  return {
    allowanceId: row.allowance_id,
    childDid: row.child_did,
    merchantDid: row.merchant_did,
    credential: row.credential,
    terms: row.terms,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    ...(row.revoked_at === null ? {} : { revokedAt: row.revoked_at }),
    ...(row.revoked_after_sequence === null ? {} : { revokedAfterSequence: row.revoked_after_sequence }),
  };
}

/**
 * Standing allowances on the household SQLite file (tables `allowances` and `allowance_holds`,
 * migrated by `lib/store.ts`). A hold and a revocation are each one `BEGIN IMMEDIATE`
 * transaction, which takes the file's write lock before it reads: across processes sharing the
 * file they run one after the other, so a hold never reads a budget or a revocation that another
 * writer is changing. Driver faults become `IdentityError('store-failed')` with the cause kept.
 */
export function createSqliteAllowanceStore(database: Database.Database): AllowanceStore {
  const columns =
    'allowance_id, child_did, merchant_did, credential, terms, created_at, expires_at, revoked_at, revoked_after_sequence';
  const insert = database.prepare(
    `INSERT INTO allowances (allowance_id, child_did, merchant_did, credential, terms, created_at, expires_at)
     VALUES (@allowanceId, @childDid, @merchantDid, @credential, @terms, @createdAt, @expiresAt)`,
  );
  const get = database.prepare<[string]>(`SELECT ${columns} FROM allowances WHERE allowance_id = ?`);
  const list = database.prepare<[]>(`SELECT ${columns} FROM allowances ORDER BY created_at DESC, rowid DESC`);
  const latestFor = database.prepare<[string, string]>(
    `SELECT ${columns} FROM allowances WHERE child_did = ? AND merchant_did = ?
     ORDER BY created_at DESC, rowid DESC LIMIT 1`,
  );
  const lastSequence = database.prepare<[]>(`SELECT COALESCE(MAX(sequence), 0) AS spent FROM allowance_holds`);
  const revoke = database.prepare(
    `UPDATE allowances SET revoked_at = @now, revoked_after_sequence = @sequence
     WHERE allowance_id = @allowanceId AND revoked_at IS NULL`,
  );
  const holdOf = database.prepare<[string]>(
    'SELECT sequence, invoice_id, allowance_id, period_key, amount_cents, budget_cents, created_at FROM allowance_holds WHERE invoice_id = ?',
  );
  const spent = database.prepare<[string, string]>(
    'SELECT COALESCE(SUM(amount_cents), 0) AS spent FROM allowance_holds WHERE allowance_id = ? AND period_key = ?',
  );
  const insertHold = database.prepare(
    `INSERT INTO allowance_holds (invoice_id, allowance_id, period_key, amount_cents, budget_cents, created_at)
     VALUES (@invoiceId, @allowanceId, @periodKey, @amountCents, @budgetCents, @now)`,
  );
  const release = database.prepare<[string]>('DELETE FROM allowance_holds WHERE invoice_id = ?');
  const spentOf = (allowanceId: string, periodKey: string) => sumRow.parse(spent.get(allowanceId, periodKey)).spent;

  const revokeTransaction = database.transaction((allowanceId: string, now: number) => {
    // Read inside the write lock: the newest hold is the last that came before this revocation.
    const sequence = sumRow.parse(lastSequence.get()).spent;
    return revoke.run({ allowanceId, now, sequence }).changes === 1;
  });

  const holdTransaction = database.transaction((hold: Parameters<AllowanceStore['hold']>[0]) => {
    // 1. This order already holds its amount (a retry of the same charge, which came before any
    //    later revocation): nothing more.
    const existing = holdOf.get(hold.invoiceId);
    if (existing !== undefined) {
      const row = holdRow.parse(existing);
      if (row.allowance_id !== hold.allowanceId || row.amount_cents !== hold.amountCents)
        return { ok: false, reason: 'unknown' } as const;
      return {
        ok: true,
        existing: true,
        remainingCents: hold.budgetCents - spentOf(hold.allowanceId, row.period_key),
      } as const;
    }
    // 2. The allowance, and whether it is revoked, read under the write lock.
    const found = get.get(hold.allowanceId);
    if (found === undefined) return { ok: false, reason: 'unknown' } as const;
    if (toRecord(found).revokedAt !== undefined) return { ok: false, reason: 'revoked' } as const;
    // 3. The period's held cents plus this order within the budget, else refused.
    const remaining = hold.budgetCents - spentOf(hold.allowanceId, hold.periodKey);
    if (hold.amountCents > remaining) return { ok: false, reason: 'over-budget', remainingCents: remaining } as const;
    insertHold.run(hold);
    return { ok: true, existing: false, remainingCents: remaining - hold.amountCents } as const;
  });

  return {
    put: (record) =>
      guarded('put', () => {
        insert.run({
          allowanceId: record.allowanceId,
          childDid: record.childDid,
          merchantDid: record.merchantDid,
          credential: record.credential,
          terms: record.terms,
          createdAt: record.createdAt,
          expiresAt: record.expiresAt,
        });
      }),
    get: (allowanceId) =>
      guarded('get', () => {
        const found = get.get(allowanceId);
        return found === undefined ? undefined : toRecord(found);
      }),
    list: () => guarded('list', () => list.all().map(toRecord)),
    latestFor: (childDid, merchantDid) =>
      guarded('latestFor', () => {
        const found = latestFor.get(childDid, merchantDid);
        return found === undefined ? undefined : toRecord(found);
      }),
    revoke: (allowanceId, now) => guarded('revoke', () => revokeTransaction.immediate(allowanceId, now)),
    hold: (hold) => guarded('hold', () => holdTransaction.immediate(hold)),
    release: (invoiceId) =>
      guarded('release', () => {
        release.run(invoiceId);
      }),
    spentCents: (allowanceId, periodKey) => guarded('spentCents', () => spentOf(allowanceId, periodKey)),
    holdOf: (invoiceId) =>
      guarded('holdOf', () => {
        const found = holdOf.get(invoiceId);
        if (found === undefined) return undefined;
        const row = holdRow.parse(found);
        return {
          sequence: row.sequence,
          invoiceId: row.invoice_id,
          allowanceId: row.allowance_id,
          periodKey: row.period_key,
          amountCents: row.amount_cents,
          budgetCents: row.budget_cents,
          now: row.created_at,
        };
      }),
  };
}

/** Runs one store operation; a driver or decoding fault becomes `store-failed` with its cause. */
async function guarded<T>(operation: string, run: () => T): Promise<T> {
  try {
    return run();
  } catch (error) {
    if (error instanceof IdentityError) throw error;
    throw new IdentityError('store-failed', `allowance store: ${operation} failed`, { cause: error });
  }
}
