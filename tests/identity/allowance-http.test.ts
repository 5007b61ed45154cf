/**
 * The parent window's allowance routes (docs/human-authority.md "Standing allowances"): begin
 * (the form → the drafted terms and options over their hash), finish (the parent's assertion →
 * the household-signed `Allowance`, stored), list (what is left of the period, in the terms' own
 * zone) and revoke. Only the parent's session, only from the site's Origin; bad input is a clear
 * 4xx and stores nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { allowanceHashOf, canonicalTerms } from '../../identity/allowance-terms';
import { createIdentityHandlers, type IdentityHandler, sessionCookieName } from '../../identity/identity-http';
import { createIdentityHarness, type IdentityHarness, origin } from './support';

let h: IdentityHarness;
let handlers: ReturnType<typeof createIdentityHandlers>;
beforeEach(async () => {
  h = await createIdentityHarness();
  handlers = createIdentityHandlers({ passkeys: h.passkeys, origin });
});
afterEach(async () => {
  await h.close();
});

const day = 24 * 60 * 60;

async function call(
  handler: IdentityHandler,
  path: string,
  send: { body?: unknown; cookie?: string; origin?: string } = {},
) {
  const headers = new Headers({ origin: send.origin ?? origin });
  if (send.cookie !== undefined) headers.set('cookie', send.cookie);
  const response = await handler(
    new Request(`${origin}${path}`, {
      method: send.body === undefined ? 'GET' : 'POST',
      headers,
      ...(send.body === undefined ? {} : { body: JSON.stringify(send.body) }),
    }),
  );
  return { status: response.status, json: (await response.json()) as Record<string, unknown> & { error?: string } };
}

/** The parent sets the household's time zone in the window: the zone the form shows and the terms state. */
async function setZone(cookie: string, timeZone: string) {
  const set = await call(handlers.householdUpdate, '/api/identity/household?as=parent', {
    body: { timeZone },
    cookie,
  });
  expect(set, set.json.error).toMatchObject({ status: 200, json: { timeZone } });
}

/** Both members enrolled, the household in Paris; their cookies. */
async function members() {
  const parent = await h.enrol('parent');
  const child = await h.enrol('child');
  const parentCookie = `${sessionCookieName('parent')}=${parent.session.token}`;
  await setZone(parentCookie, 'Europe/Paris');
  return {
    parent,
    child,
    parentCookie,
    childCookie: `${sessionCookieName('child')}=${child.session.token}`,
  };
}

/** $5.00 an order, $10.00 a day at the harness's shop, for 30 days. */
function form(overrides: Record<string, unknown> = {}) {
  return {
    merchantDid: h.merchant.did,
    perOrderCapCents: 500,
    budgetCents: 1000,
    period: 'day',
    timeZone: 'Europe/Paris',
    expiresAt: Math.floor(h.clock.now().getTime() / 1000) + 30 * day,
    ...overrides,
  };
}

/** The parent signs the form in the window: begin, the passkey, finish. */
async function sign(cookie: string, assert: (options: never) => unknown, body = form()) {
  const begun = await call(handlers.allowanceOptions, '/api/identity/allowance/options?as=parent', { body, cookie });
  expect(begun.status, begun.json.error).toBe(200);
  return {
    begun,
    finished: await call(handlers.allowanceVerify, '/api/identity/allowance/verify?as=parent', {
      body: { ceremonyId: begun.json.ceremonyId, response: assert(begun.json.options as never) },
      cookie,
    }),
  };
}

describe('the parent signs a standing allowance in the window', () => {
  it('the passkey signs the hash of exactly the terms shown; the list says what is left; revoke ends it at once', async () => {
    const { parent, parentCookie, childCookie } = await members();
    const { begun, finished } = await sign(parentCookie, (options) => parent.authenticator.assert(options));
    const terms = begun.json.terms as Parameters<typeof canonicalTerms>[0];
    // The merchant's name is the one the household trusts it under; the child is the household's.
    expect(terms).toMatchObject({
      merchantName: 'Pizza Shop',
      childDid: h.household.members.child,
      perOrderCapCents: 500,
      budgetCents: 1000,
      period: 'day',
      timeZone: 'Europe/Paris',
    });
    expect((begun.json.options as { challenge: string }).challenge).toBe(allowanceHashOf(canonicalTerms(terms)));
    expect(finished).toMatchObject({ status: 200, json: { allowanceId: terms.id } });

    const listed = await call(handlers.allowances, '/api/identity/allowances?as=parent', { cookie: parentCookie });
    expect(listed.json).toMatchObject({
      allowances: [{ allowanceId: terms.id, state: 'active', remainingCents: 1000, periodKey: '2026-06-01' }],
      merchants: [{ did: h.merchant.did, name: 'Pizza Shop' }],
    });

    // The child's $4 order asks only the child, and its card says what the allowance leaves.
    const order = await h.requestApproval(400);
    const pending = await call(handlers.pending, '/api/identity/pending?as=child', { cookie: childCookie });
    expect(pending.json.approvals).toEqual([
      expect.objectContaining({
        approvalId: order.approvalId,
        requiredRoles: ['child'],
        allowance: { allowanceId: terms.id, period: 'day', remainingCents: 600 },
      }),
    ]);

    const revoked = await call(handlers.allowanceRevoke, '/api/identity/allowance/revoke?as=parent', {
      body: { allowanceId: terms.id },
      cookie: parentCookie,
    });
    expect(revoked).toMatchObject({ status: 200, json: { allowanceId: terms.id, revokedAt: expect.any(String) } });
    const after = await call(handlers.allowances, '/api/identity/allowances?as=parent', { cookie: parentCookie });
    expect(after.json.allowances).toEqual([
      expect.objectContaining({
        allowanceId: terms.id,
        state: 'revoked',
        remainingCents: 0,
        revokedAt: expect.any(String),
      }),
    ]);
    // The order no longer stands on it; the next asks the parent.
    const again = await call(handlers.pending, '/api/identity/pending?as=child', { cookie: childCookie });
    expect(again.json.approvals).toEqual([expect.not.objectContaining({ allowance: expect.anything() })]);
    expect(
      (await h.approvals.request(await invoiceOf(400))).ok && (await h.approvals.pendingFor('parent')).length,
    ).toBe(1);
    expect(
      await call(handlers.allowanceRevoke, '/api/identity/allowance/revoke?as=parent', {
        body: { allowanceId: terms.id },
        cookie: parentCookie,
      }),
    ).toMatchObject({ status: 409, json: { error: 'the allowance is already revoked' } });
  });

  it("counts the day in the terms' zone, not the server's", async () => {
    const { parent, parentCookie } = await members();
    await setZone(parentCookie, 'America/Los_Angeles');
    // 2026-06-01T10:00Z is 03:00 in Los Angeles.
    const { begun } = await sign(
      parentCookie,
      (options) => parent.authenticator.assert(options),
      form({ timeZone: 'America/Los_Angeles' }),
    );
    const allowanceId = String((begun.json.terms as { id: string }).id);
    const order = await h.requestApproval(400);
    expect(
      await h.allowances.hold({
        allowanceId,
        invoiceId: order.invoiceId,
        childDid: h.household.members.child,
        merchantDid: h.merchant.did,
        totalCents: 400,
      }),
    ).toMatchObject({ ok: true, remainingCents: 600 });
    // Past the session's day: the list the route answers with, read directly.
    const left = async () => (await h.allowances.list())[0];
    // 00:01 UTC the next day: a new day in UTC, still 17:01 on 1 June in Los Angeles.
    h.clock.advance(14 * 60 * 60 * 1000 + 60_000);
    expect(await left()).toMatchObject({ periodKey: '2026-06-01', remainingCents: 600 });
    // 00:01 on 2 June in Los Angeles: the whole budget again.
    h.clock.advance(7 * 60 * 60 * 1000);
    expect(await left()).toMatchObject({ periodKey: '2026-06-02', remainingCents: 1000 });
  });
});

describe('refusals: a clear 4xx, nothing stored', () => {
  it.each([
    ['an unknown merchant', { merchantDid: 'did:key:z6MkNotTrusted' }, 400, /not one the household trusts/],
    ['a cap over the budget', { perOrderCapCents: 1500 }, 400, /per-order cap is at most the budget/],
    // The form states the zone it showed: another than the household's (a stale form) is refused.
    [
      "a zone other than the household's",
      { timeZone: 'America/New_York' },
      409,
      /the form shows the time zone America\/New_York, but the household's is Europe\/Paris; look at the form again/,
    ],
    ['a zone that is not one', { timeZone: 'Mars/Olympus' }, 409, /the household's is Europe\/Paris/],
    ['an end in the past', { expiresAt: 1 }, 400, /ends after it starts/],
    ['a period other than day or week', { period: 'month' }, 400, /period/],
    ['a field the form has no place for', { childDid: 'did:key:z6MkOther' }, 400, /childDid/],
  ])('%s', async (_name, overrides, status, error) => {
    const { parentCookie } = await members();
    const begun = await call(handlers.allowanceOptions, '/api/identity/allowance/options?as=parent', {
      body: form(overrides),
      cookie: parentCookie,
    });
    expect(begun.status).toBe(status);
    expect(begun.json.error).toMatch(error);
    expect(await h.allowances.list()).toEqual([]);
  });

  it("only the parent's session, only from the site's origin", async () => {
    const { child, parentCookie, childCookie } = await members();
    expect(
      await call(handlers.allowanceOptions, '/api/identity/allowance/options?as=parent', {
        body: form(),
        cookie: childCookie,
      }),
    ).toMatchObject({ status: 401 });
    expect(
      await call(handlers.allowanceOptions, '/api/identity/allowance/options?as=child', {
        body: form(),
        cookie: childCookie,
      }),
    ).toMatchObject({ status: 403, json: { error: 'only the parent signs a standing allowance' } });
    expect(await call(handlers.allowances, '/api/identity/allowances?as=child', { cookie: childCookie })).toMatchObject(
      {
        status: 403,
      },
    );
    expect(
      await call(handlers.allowanceOptions, '/api/identity/allowance/options?as=parent', {
        body: form(),
        cookie: parentCookie,
        origin: 'http://localhost:3001',
      }),
    ).toMatchObject({ status: 403, json: { error: 'requests from http://localhost:3001 are not accepted' } });
    // The child's passkey cannot finish the parent's ceremony.
    const begun = await call(handlers.allowanceOptions, '/api/identity/allowance/options?as=parent', {
      body: form(),
      cookie: parentCookie,
    });
    const childSigned = await call(handlers.allowanceVerify, '/api/identity/allowance/verify?as=parent', {
      body: {
        ceremonyId: begun.json.ceremonyId,
        response: child.authenticator.assert({ ...(begun.json.options as object), allowCredentials: [] } as never),
      },
      cookie: parentCookie,
    });
    expect(childSigned.status).toBeGreaterThanOrEqual(400);
    expect(await h.allowances.list()).toEqual([]);
  });

  it('an assertion over other terms, or a ceremony used twice, signs nothing', async () => {
    const { parent, parentCookie } = await members();
    const first = await call(handlers.allowanceOptions, '/api/identity/allowance/options?as=parent', {
      body: form(),
      cookie: parentCookie,
    });
    const other = await call(handlers.allowanceOptions, '/api/identity/allowance/options?as=parent', {
      body: form({ budgetCents: 2000 }),
      cookie: parentCookie,
    });
    // The passkey signed the $20.00 terms; the ceremony is the $10.00 one.
    const swapped = await call(handlers.allowanceVerify, '/api/identity/allowance/verify?as=parent', {
      body: { ceremonyId: first.json.ceremonyId, response: parent.authenticator.assert(other.json.options as never) },
      cookie: parentCookie,
    });
    expect(swapped).toMatchObject({ status: 401, json: { error: 'challenge does not match this ceremony' } });
    expect(await h.allowances.list()).toEqual([]);
    const response = parent.authenticator.assert(other.json.options as never);
    const body = { ceremonyId: other.json.ceremonyId, response };
    expect(
      await call(handlers.allowanceVerify, '/api/identity/allowance/verify?as=parent', { body, cookie: parentCookie }),
    ).toMatchObject({ status: 200 });
    expect(
      await call(handlers.allowanceVerify, '/api/identity/allowance/verify?as=parent', { body, cookie: parentCookie }),
    ).toMatchObject({ status: 400, json: { error: 'unknown or already used allowance ceremony; start again' } });
    expect(await h.allowances.list()).toHaveLength(1);
  });
});

/** A merchant-signed invoice for the harness's shop (for a second request on the same day). */
async function invoiceOf(totalCents: number): Promise<string> {
  const { signCredential } = await import('../../shop-agent/sign-credential');
  const { jws } = await signCredential(h.merchant, {
    type: 'Invoice',
    subject: {
      merchantId: h.merchant.did,
      merchantName: 'Pizza Shop',
      items: [{ sku: 'slice', name: 'Cheese slice', qty: 1, unitPriceCents: totalCents, listPriceCents: totalCents }],
      totalCents,
      currency: 'usd',
      deliverTo: '12 Main St',
    },
    ttlSeconds: 5 * 60,
    now: h.clock.now(),
  });
  return jws;
}
