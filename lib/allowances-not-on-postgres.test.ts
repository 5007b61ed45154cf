import { describe, expect, it } from 'vitest';
import { allowancesNotOnPostgres } from './allowances-not-on-postgres';

describe('the allowance store of a household on PostgreSQL, before its twin', () => {
  it('refuses to sign or revoke an allowance, so none exists and none can hold a budget', async () => {
    const store = allowancesNotOnPostgres();
    await expect(store.put({} as never)).rejects.toMatchObject({
      name: 'IdentityError',
      code: 'store-failed',
      message: expect.stringContaining('no PostgreSQL store yet'),
    });
    await expect(store.revoke('a', 1)).rejects.toMatchObject({ code: 'store-failed' });
    expect(await store.list()).toEqual([]);
    expect(await store.latestFor('did:child', 'did:shop')).toBeUndefined();
    expect(
      await store.hold({
        allowanceId: 'a',
        periodKey: 'p',
        invoiceId: 'i',
        amountCents: 400,
        budgetCents: 1000,
        now: 1,
      }),
    ).toEqual({ ok: false, reason: 'unknown' });
  });
});
