/**
 * One contract for every allowance store (docs/human-authority.md "Standing allowances"; issue 28),
 * run on SQLite and PostgreSQL. The single-instance part is what any implementation shows; the
 * shared part opens two handles on one location (two SQLite connections, two `pg` pools) and races
 * them: a budget is never overspent, a revocation orders every hold, and an order holds once,
 * however many instances are asked at once.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { AllowanceHold, AllowanceRecord, AllowanceStore } from '../../identity/index';
import { type HouseholdStoreHandle as Handle, householdStoreOpeners } from '../support/household-store-openers';
import { postgresAvailable, postgresUnavailable } from '../support/postgres';

const { implementations, cleanUp } = householdStoreOpeners();
afterEach(cleanUp);

it.skipIf(postgresAvailable)(`the PostgreSQL allowance store is skipped: ${postgresUnavailable}`, () => {});

const t0 = 1_750_000_000_000;

function allowance(index: number, overrides: Partial<AllowanceRecord> = {}): AllowanceRecord {
  return {
    allowanceId: `urn:uuid:allowance-${index}`,
    childDid: 'did:web:household:child',
    merchantDid: 'did:web:pizza',
    credential: `eyJ.credential-${index}`,
    terms: `{"budgetCents":1000,"index":${index}}`,
    createdAt: t0 + index,
    expiresAt: t0 + 30 * 86_400_000,
    ...overrides,
  };
}

function hold(allowanceId: string, invoiceId: string, overrides: Partial<AllowanceHold> = {}): AllowanceHold {
  return {
    allowanceId,
    periodKey: '2026-12-03',
    invoiceId,
    amountCents: 400,
    budgetCents: 1000,
    now: t0 + 1000,
    ...overrides,
  };
}

/** `count` calls of `run`, alternating between the handles, all started at once. */
function race<T>(
  handles: readonly Handle[],
  count: number,
  run: (store: AllowanceStore, index: number) => Promise<T>,
): Promise<T[]> {
  return Promise.all(
    Array.from({ length: count }, (_, index) => run((handles[index % handles.length] as Handle).allowances, index)),
  );
}

describe.each(Object.entries(implementations))('the %s allowance store', (_name, kind) => {
  const handle = async (location?: string): Promise<Handle> => kind.open(location ?? (await kind.location()));
  const store = async () => (await handle()).allowances;
  /** Two independent handles on one fresh location. */
  const shared = async (): Promise<Handle[]> => {
    const location = await kind.location();
    return [await handle(location), await handle(location)];
  };

  describe('single instance', () => {
    it('stores an allowance and reads it back exactly, by id, in the list and as the newest for its child and merchant', async () => {
      const allowances = await store();
      const first = allowance(1);
      await allowances.put(first);
      expect(await allowances.get(first.allowanceId)).toStrictEqual(first);
      expect(await allowances.list()).toStrictEqual([first]);
      expect(await allowances.latestFor(first.childDid, first.merchantDid)).toStrictEqual(first);
      expect(await allowances.get('urn:uuid:other')).toBeUndefined();
      expect(await allowances.latestFor(first.childDid, 'did:web:other')).toBeUndefined();
    });

    it('lists newest first, in insertion order within one millisecond, and finds the newest for a child and merchant', async () => {
      const allowances = await store();
      await allowances.put(allowance(1, { createdAt: t0 }));
      await allowances.put(allowance(2, { createdAt: t0 + 5 }));
      await allowances.put(allowance(3, { createdAt: t0 + 5 }));
      await allowances.put(allowance(4, { createdAt: t0 + 9, merchantDid: 'did:web:other' }));
      // A revocation updates the row; it never moves it in the order.
      await allowances.revoke(allowance(2).allowanceId, t0 + 10);
      expect((await allowances.list()).map((record) => record.allowanceId)).toStrictEqual([
        allowance(4).allowanceId,
        allowance(3).allowanceId,
        allowance(2).allowanceId,
        allowance(1).allowanceId,
      ]);
      expect((await allowances.latestFor('did:web:household:child', 'did:web:pizza'))?.allowanceId).toBe(
        allowance(3).allowanceId,
      );
    });

    it('refuses an allowance id already stored, and keeps the first', async () => {
      const allowances = await store();
      await allowances.put(allowance(1));
      await expect(allowances.put(allowance(1, { credential: 'eyJ.other' }))).rejects.toMatchObject({
        code: 'store-failed',
      });
      expect(await allowances.get(allowance(1).allowanceId)).toStrictEqual(allowance(1));
    });

    it('holds within the period budget, refuses beyond it with what is left, and counts periods apart', async () => {
      const allowances = await store();
      const { allowanceId } = allowance(1);
      await allowances.put(allowance(1));
      expect(await allowances.hold(hold(allowanceId, 'invoice-1'))).toStrictEqual({
        ok: true,
        existing: false,
        remainingCents: 600,
      });
      expect(await allowances.hold(hold(allowanceId, 'invoice-2'))).toStrictEqual({
        ok: true,
        existing: false,
        remainingCents: 200,
      });
      expect(await allowances.hold(hold(allowanceId, 'invoice-3'))).toStrictEqual({
        ok: false,
        reason: 'over-budget',
        remainingCents: 200,
      });
      expect(await allowances.holdOf('invoice-3')).toBeUndefined();
      expect(await allowances.hold(hold(allowanceId, 'invoice-4', { amountCents: 200 }))).toMatchObject({
        ok: true,
        remainingCents: 0,
      });
      expect(await allowances.spentCents(allowanceId, '2026-12-03')).toBe(1000);
      // The next day is a budget of its own.
      expect(await allowances.hold(hold(allowanceId, 'invoice-5', { periodKey: '2026-12-04' }))).toMatchObject({
        ok: true,
        remainingCents: 600,
      });
      expect(await allowances.spentCents(allowanceId, '2026-12-04')).toBe(400);
      expect(await allowances.spentCents(allowanceId, '2026-12-05')).toBe(0);
    });

    it('finds the hold of a retried order and adds nothing; another allowance or amount for it is refused', async () => {
      const allowances = await store();
      await allowances.put(allowance(1));
      await allowances.put(allowance(2));
      const first = hold(allowance(1).allowanceId, 'invoice-1');
      await allowances.hold(first);
      expect(await allowances.hold(first)).toStrictEqual({ ok: true, existing: true, remainingCents: 600 });
      expect(await allowances.hold({ ...first, amountCents: 500 })).toStrictEqual({ ok: false, reason: 'unknown' });
      expect(await allowances.hold({ ...first, allowanceId: allowance(2).allowanceId })).toStrictEqual({
        ok: false,
        reason: 'unknown',
      });
      expect(await allowances.spentCents(allowance(1).allowanceId, first.periodKey)).toBe(400);
      expect(await allowances.spentCents(allowance(2).allowanceId, first.periodKey)).toBe(0);
      expect(await allowances.holdOf('invoice-1')).toStrictEqual({ ...first, sequence: expect.any(Number) });
    });

    it('releases a declined order, which frees its budget; releasing an order without a hold changes nothing', async () => {
      const allowances = await store();
      const { allowanceId } = allowance(1);
      await allowances.put(allowance(1));
      await allowances.hold(hold(allowanceId, 'invoice-1'));
      await allowances.hold(hold(allowanceId, 'invoice-2'));
      await allowances.release('invoice-1');
      await allowances.release('invoice-none');
      expect(await allowances.holdOf('invoice-1')).toBeUndefined();
      expect(await allowances.spentCents(allowanceId, '2026-12-03')).toBe(400);
      expect(await allowances.hold(hold(allowanceId, 'invoice-3', { amountCents: 600 }))).toMatchObject({
        ok: true,
        remainingCents: 0,
      });
    });

    it('revokes once, records the newest hold before it, and refuses every later hold but a retried one', async () => {
      const allowances = await store();
      const { allowanceId } = allowance(1);
      await allowances.put(allowance(1));
      await allowances.hold(hold(allowanceId, 'invoice-1', { amountCents: 100 }));
      await allowances.hold(hold(allowanceId, 'invoice-2', { amountCents: 100 }));
      const last = (await allowances.holdOf('invoice-2'))?.sequence;
      expect(await allowances.revoke(allowanceId, t0 + 2000)).toBe(true);
      expect(await allowances.revoke(allowanceId, t0 + 3000)).toBe(false);
      expect(await allowances.revoke('urn:uuid:unknown', t0 + 3000)).toBe(false);
      const revoked = await allowances.get(allowanceId);
      expect(revoked).toStrictEqual({ ...allowance(1), revokedAt: t0 + 2000, revokedAfterSequence: last });
      expect(await allowances.hold(hold(allowanceId, 'invoice-3', { amountCents: 100 }))).toStrictEqual({
        ok: false,
        reason: 'revoked',
      });
      // The retry of a charge that held before the revocation still finds its hold.
      expect(await allowances.hold(hold(allowanceId, 'invoice-2', { amountCents: 100 }))).toMatchObject({
        ok: true,
        existing: true,
      });
      expect(await allowances.holdOf('invoice-3')).toBeUndefined();
    });

    it('records zero as the newest hold of an allowance revoked before any hold', async () => {
      const allowances = await store();
      await allowances.put(allowance(1));
      await allowances.revoke(allowance(1).allowanceId, t0 + 1);
      expect((await allowances.get(allowance(1).allowanceId))?.revokedAfterSequence).toBe(0);
    });

    it('refuses a hold of an unknown allowance, and a hold of no amount, and holds nothing for them', async () => {
      const allowances = await store();
      await allowances.put(allowance(1));
      expect(await allowances.hold(hold('urn:uuid:unknown', 'invoice-1'))).toStrictEqual({
        ok: false,
        reason: 'unknown',
      });
      await expect(
        allowances.hold(hold(allowance(1).allowanceId, 'invoice-2', { amountCents: 0 })),
      ).rejects.toMatchObject({ code: 'store-failed' });
      expect(await allowances.holdOf('invoice-1')).toBeUndefined();
      expect(await allowances.holdOf('invoice-2')).toBeUndefined();
    });
  });

  describe('shared by two instances', () => {
    it('grants exactly two of 20 concurrent $4 holds against a $10 budget through two handles, five rounds', async () => {
      const handles = await shared();
      for (let round = 0; round < 5; round += 1) {
        const record = allowance(round);
        await (handles[0] as Handle).allowances.put(record);
        const results = await race(handles, 20, (allowances, index) =>
          allowances.hold(hold(record.allowanceId, `invoice-${round}-${index}`)),
        );
        expect(results.filter((result) => result.ok)).toHaveLength(2);
        expect(results.filter((result) => !result.ok && result.reason === 'over-budget')).toHaveLength(18);
        expect(await (handles[1] as Handle).allowances.spentCents(record.allowanceId, '2026-12-03')).toBe(800);
      }
    });

    it('orders a revocation racing holds through two handles: every granted hold is at most its recorded sequence, five rounds', async () => {
      const handles = await shared();
      for (let round = 0; round < 5; round += 1) {
        const record = allowance(round);
        await (handles[0] as Handle).allowances.put(record);
        const holds = race(handles, 30, (allowances, index) =>
          allowances.hold(hold(record.allowanceId, `invoice-${round}-${index}`, { amountCents: 1, budgetCents: 100 })),
        );
        const revoked = (handles[round % 2] as Handle).allowances.revoke(record.allowanceId, t0 + 5000);
        const [results, wasRevoked] = await Promise.all([holds, revoked]);
        expect(wasRevoked).toBe(true);
        const cutoff = (await (handles[1] as Handle).allowances.get(record.allowanceId))?.revokedAfterSequence;
        expect(cutoff).toEqual(expect.any(Number));
        for (const [index, result] of results.entries()) {
          const held = await (handles[0] as Handle).allowances.holdOf(`invoice-${round}-${index}`);
          if (result.ok) expect(held?.sequence).toBeLessThanOrEqual(cutoff as number);
          else {
            expect(result).toStrictEqual({ ok: false, reason: 'revoked' });
            expect(held).toBeUndefined();
          }
        }
        // Nothing is held after the revocation, even by a hold that started before it.
        const granted = results.filter((result) => result.ok).length;
        expect(await (handles[0] as Handle).allowances.spentCents(record.allowanceId, '2026-12-03')).toBe(granted);
      }
    });

    it('revokes once among 10 concurrent revocations through two handles: one reports it, and its time and sequence stay', async () => {
      for (let round = 0; round < 3; round += 1) {
        const handles = await shared();
        const record = allowance(round);
        await (handles[0] as Handle).allowances.put(record);
        expect((await (handles[1] as Handle).allowances.hold(hold(record.allowanceId, `inv-${round}`))).ok).toBe(true);
        const sequence = (await (handles[0] as Handle).allowances.holdOf(`inv-${round}`))?.sequence;
        const revoked = await race(handles, 10, (allowances, index) =>
          allowances.revoke(record.allowanceId, t0 + 5000 + index),
        );
        expect(revoked.filter(Boolean)).toHaveLength(1);
        const winner = revoked.indexOf(true);
        for (const each of handles) {
          expect(await each.allowances.get(record.allowanceId)).toStrictEqual({
            ...record,
            revokedAt: t0 + 5000 + winner,
            revokedAfterSequence: sequence,
          });
        }
      }
    });

    it('holds an order once among 20 concurrent retries through two handles, and every retry finds that hold', async () => {
      const handles = await shared();
      const record = allowance(1);
      await (handles[0] as Handle).allowances.put(record);
      const results = await race(handles, 20, (allowances) => allowances.hold(hold(record.allowanceId, 'invoice-1')));
      expect(results.every((result) => result.ok)).toBe(true);
      expect(results.filter((result) => result.ok && !result.existing)).toHaveLength(1);
      expect(await (handles[1] as Handle).allowances.spentCents(record.allowanceId, '2026-12-03')).toBe(400);
    });

    it('holds an order against one allowance when two allowances are held for it at once through two handles', async () => {
      const handles = await shared();
      for (let round = 0; round < 5; round += 1) {
        const first = allowance(2 * round);
        const second = allowance(2 * round + 1);
        await (handles[0] as Handle).allowances.put(first);
        await (handles[0] as Handle).allowances.put(second);
        const invoiceId = `invoice-${round}`;
        const results = await race(handles, 10, (allowances, index) =>
          allowances.hold(hold((index % 4 < 2 ? first : second).allowanceId, invoiceId)),
        );
        const spent =
          (await (handles[1] as Handle).allowances.spentCents(first.allowanceId, '2026-12-03')) +
          (await (handles[1] as Handle).allowances.spentCents(second.allowanceId, '2026-12-03'));
        expect(spent).toBe(400);
        expect(results.filter((result) => result.ok && !result.existing)).toHaveLength(1);
      }
    });

    it('frees a declined order for another instance: the budget it held is spendable through the other handle', async () => {
      const handles = await shared();
      const record = allowance(1);
      await (handles[0] as Handle).allowances.put(record);
      await (handles[0] as Handle).allowances.hold(hold(record.allowanceId, 'invoice-1', { amountCents: 1000 }));
      expect(await (handles[1] as Handle).allowances.hold(hold(record.allowanceId, 'invoice-2'))).toMatchObject({
        ok: false,
        reason: 'over-budget',
      });
      await (handles[0] as Handle).allowances.release('invoice-1');
      expect(await (handles[1] as Handle).allowances.hold(hold(record.allowanceId, 'invoice-2'))).toMatchObject({
        ok: true,
        remainingCents: 600,
      });
    });
  });
});

/**
 * The PostgreSQL tables' own lines, behind the store's checks: the store refuses these cases before
 * any insert, so only a statement past it (a bug, an operator's SQL) reaches them, and the table
 * still refuses it.
 */
describe.skipIf(!postgresAvailable)('the PostgreSQL allowance tables', () => {
  it('refuse a hold of no budget, of an unknown allowance, and a sequence given twice, and keep no row of them', async () => {
    const opener = implementations.postgres as (typeof implementations)['sqlite'];
    const url = await opener.location();
    await (await opener.open(url)).allowances.put(allowance(1));
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const insert = (values: string, overriding = '') =>
        client.query(
          `INSERT INTO allowance_holds (${overriding ? 'sequence, ' : ''}invoice_id, allowance_id, period_key, amount_cents, budget_cents, created_at) ${overriding} VALUES (${values})`,
        );
      await expect(insert(`'invoice-1', '${allowance(1).allowanceId}', '2026-12-03', 400, 0, 0`)).rejects.toThrow(
        /budget_cents_check/,
      );
      await expect(insert(`'invoice-2', 'urn:uuid:unknown', '2026-12-03', 400, 1000, 0`)).rejects.toThrow(
        /foreign key/,
      );
      await insert(
        `7, 'invoice-3', '${allowance(1).allowanceId}', '2026-12-03', 400, 1000, 0`,
        'OVERRIDING SYSTEM VALUE',
      );
      await expect(
        insert(`7, 'invoice-4', '${allowance(1).allowanceId}', '2026-12-03', 400, 1000, 0`, 'OVERRIDING SYSTEM VALUE'),
      ).rejects.toThrow(/allowance_holds_pkey/);
      const kept = await client.query<{ invoice_id: string }>('SELECT invoice_id FROM allowance_holds');
      expect(kept.rows.map((row) => row.invoice_id)).toStrictEqual(['invoice-3']);
    } finally {
      await client.end();
    }
  });
});
