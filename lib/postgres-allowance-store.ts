import type pg from 'pg';
import { z } from 'zod';
import { type AllowanceHold, type AllowanceRecord, type AllowanceStore, IdentityError } from '../identity/index';
import { inTransaction, type Migration } from '../proxy/index';

/**
 * The standing allowances' tables on PostgreSQL (docs/human-authority.md "Standing allowances",
 * issue 28), module `allowances` like SQLite's, with the same columns; times are milliseconds as
 * `BIGINT`, and a hold's `sequence` is an identity column where SQLite uses `AUTOINCREMENT`.
 * Append a version to change them; never edit one that has shipped.
 */
export const postgresAllowanceMigrations: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE allowances (
        allowance_id TEXT PRIMARY KEY,
        child_did TEXT NOT NULL,
        merchant_did TEXT NOT NULL,
        credential TEXT NOT NULL,
        terms TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        revoked_at BIGINT,
        revoked_after_sequence BIGINT,
        position BIGINT GENERATED ALWAYS AS IDENTITY
      );
      CREATE INDEX allowances_by_child_merchant ON allowances (child_did, merchant_did, created_at);
      CREATE TABLE allowance_holds (
        sequence BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        invoice_id TEXT NOT NULL UNIQUE,
        allowance_id TEXT NOT NULL REFERENCES allowances (allowance_id),
        period_key TEXT NOT NULL,
        amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
        budget_cents INTEGER NOT NULL CHECK (budget_cents > 0),
        created_at BIGINT NOT NULL
      );
      CREATE INDEX allowance_holds_by_period ON allowance_holds (allowance_id, period_key);
    `,
  },
];

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

// BIGINT columns arrive as strings from node-postgres: every one is selected as float8, so the rows
// decode exactly as SQLite's do.
const columns = `allowance_id, child_did, merchant_did, credential, terms, created_at::float8 AS created_at,
  expires_at::float8 AS expires_at, revoked_at::float8 AS revoked_at,
  revoked_after_sequence::float8 AS revoked_after_sequence`;
const holdColumns = `sequence::float8 AS sequence, invoice_id, allowance_id, period_key, amount_cents, budget_cents,
  created_at::float8 AS created_at`;

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

function toHold(raw: unknown): AllowanceHold & { readonly sequence: number } {
  const row = holdRow.parse(raw);
  return {
    sequence: row.sequence,
    invoiceId: row.invoice_id,
    allowanceId: row.allowance_id,
    periodKey: row.period_key,
    amountCents: row.amount_cents,
    budgetCents: row.budget_cents,
    now: row.created_at,
  };
}

type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

/**
 * Standing allowances on a PostgreSQL pool whose owner has applied
 * {@link postgresAllowanceMigrations} (issue 28): every instance on the database spends one budget.
 * A hold and a revocation are each one transaction that first locks the allowance's row (`SELECT …
 * FOR UPDATE`), so at `READ COMMITTED` the holds and the revocation of one allowance run one after
 * the other: a hold reads the period's spend and the revocation after every earlier hold
 * committed, and a revocation reads the newest hold sequence after every earlier hold committed.
 * The unique invoice id keeps one hold per order even across allowances. Driver faults become
 * `IdentityError('store-failed')` with the cause kept. The pool is its owner's.
 */
export function createPostgresAllowanceStore(pool: pg.Pool): AllowanceStore {
  /** Runs `work` in one transaction on one connection; a connection that failed is discarded. */
  const transaction = async <T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      return await inTransaction(client, () => work(client));
    } catch (error) {
      broken = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      client.release(broken);
    }
  };
  /** The allowance's row, locked until the transaction ends: holds and revocations of it queue here. */
  const locked = async (client: pg.PoolClient, allowanceId: string) => {
    const found = (
      await client.query(`SELECT ${columns} FROM allowances WHERE allowance_id = $1 FOR UPDATE`, [allowanceId])
    ).rows[0];
    return found === undefined ? undefined : toRecord(found);
  };
  const holdOf = async (db: Queryable, invoiceId: string) => {
    const found = (await db.query(`SELECT ${holdColumns} FROM allowance_holds WHERE invoice_id = $1`, [invoiceId]))
      .rows[0];
    return found === undefined ? undefined : toHold(found);
  };
  const spentOf = async (db: Queryable, allowanceId: string, periodKey: string) =>
    sumRow.parse(
      (
        await db.query(
          'SELECT COALESCE(SUM(amount_cents), 0)::float8 AS spent FROM allowance_holds WHERE allowance_id = $1 AND period_key = $2',
          [allowanceId, periodKey],
        )
      ).rows[0],
    ).spent;
  /** The answer to a retry: the order's hold, if it is this allowance's and amount. */
  const retried = async (db: Queryable, hold: AllowanceHold, existing: AllowanceHold) =>
    existing.allowanceId !== hold.allowanceId || existing.amountCents !== hold.amountCents
      ? ({ ok: false, reason: 'unknown' } as const)
      : ({
          ok: true,
          existing: true,
          remainingCents: hold.budgetCents - (await spentOf(db, hold.allowanceId, existing.periodKey)),
        } as const);

  return {
    put: (record) =>
      guarded('put', async () => {
        await pool.query(
          `INSERT INTO allowances (allowance_id, child_did, merchant_did, credential, terms, created_at, expires_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7)`,
          [
            record.allowanceId,
            record.childDid,
            record.merchantDid,
            record.credential,
            record.terms,
            record.createdAt,
            record.expiresAt,
          ],
        );
      }),
    get: (allowanceId) =>
      guarded('get', async () => {
        const found = (await pool.query(`SELECT ${columns} FROM allowances WHERE allowance_id = $1`, [allowanceId]))
          .rows[0];
        return found === undefined ? undefined : toRecord(found);
      }),
    list: () =>
      guarded('list', async () =>
        (await pool.query(`SELECT ${columns} FROM allowances ORDER BY created_at DESC, position DESC`)).rows.map(
          toRecord,
        ),
      ),
    latestFor: (childDid, merchantDid) =>
      guarded('latestFor', async () => {
        const found = (
          await pool.query(
            `SELECT ${columns} FROM allowances WHERE child_did = $1 AND merchant_did = $2
             ORDER BY created_at DESC, position DESC LIMIT 1`,
            [childDid, merchantDid],
          )
        ).rows[0];
        return found === undefined ? undefined : toRecord(found);
      }),
    revoke: (allowanceId, now) =>
      guarded('revoke', () =>
        transaction(async (client) => {
          // The row lock orders this revocation after every hold of this allowance that came first.
          if ((await locked(client, allowanceId)) === undefined) return false;
          // Read under the row lock: every hold of this allowance that came first has committed, and
          // every later one waits for this commit and then finds it revoked.
          const sequence = sumRow.parse(
            (
              await client.query(
                'SELECT COALESCE(MAX(sequence), 0)::float8 AS spent FROM allowance_holds WHERE allowance_id = $1',
                [allowanceId],
              )
            ).rows[0],
          ).spent;
          // The statement's condition decides whether this is the first revocation, as SQLite's
          // does: a second one changes nothing, neither the time nor the sequence, and says so.
          const changed = await client.query(
            `UPDATE allowances SET revoked_at = $2, revoked_after_sequence = $3
             WHERE allowance_id = $1 AND revoked_at IS NULL`,
            [allowanceId, now, sequence],
          );
          return changed.rowCount === 1;
        }),
      ),
    hold: (hold) =>
      guarded('hold', () =>
        transaction(async (client) => {
          // 1. The allowance, locked: the other holds and the revocation of it wait for this one.
          const record = await locked(client, hold.allowanceId);
          // 2. This order already holds its amount (a retry of the same charge, which came before any
          //    later revocation): nothing more.
          const existing = await holdOf(client, hold.invoiceId);
          if (existing !== undefined) return retried(client, hold, existing);
          if (record === undefined) return { ok: false, reason: 'unknown' } as const;
          if (record.revokedAt !== undefined) return { ok: false, reason: 'revoked' } as const;
          // 3. The period's held cents plus this order within the budget, else refused.
          const remaining = hold.budgetCents - (await spentOf(client, hold.allowanceId, hold.periodKey));
          if (hold.amountCents > remaining)
            return { ok: false, reason: 'over-budget', remainingCents: remaining } as const;
          // The invoice id decides between two allowances held for one order at once: the loser
          // inserts nothing and answers as a retry of the winner's hold.
          const inserted = await client.query(
            `INSERT INTO allowance_holds (invoice_id, allowance_id, period_key, amount_cents, budget_cents, created_at)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (invoice_id) DO NOTHING`,
            [hold.invoiceId, hold.allowanceId, hold.periodKey, hold.amountCents, hold.budgetCents, hold.now],
          );
          if (inserted.rowCount !== 1) {
            const winner = await holdOf(client, hold.invoiceId);
            return winner === undefined ? ({ ok: false, reason: 'unknown' } as const) : retried(client, hold, winner);
          }
          return { ok: true, existing: false, remainingCents: remaining - hold.amountCents } as const;
        }),
      ),
    release: (invoiceId) =>
      guarded('release', async () => {
        await pool.query('DELETE FROM allowance_holds WHERE invoice_id = $1', [invoiceId]);
      }),
    spentCents: (allowanceId, periodKey) => guarded('spentCents', () => spentOf(pool, allowanceId, periodKey)),
    holdOf: (invoiceId) => guarded('holdOf', () => holdOf(pool, invoiceId)),
  };
}

/** Runs one store operation; a driver or decoding fault becomes `store-failed` with its cause. */
async function guarded<T>(operation: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof IdentityError) throw error;
    throw new IdentityError('store-failed', `allowance store: ${operation} failed`, { cause: error });
  }
}
