/**
 * The household's names for its members and its time zone, through the window's routes
 * (docs/human-authority.md "Member names and the household's time zone"): either member's session
 * reads them, only the parent's session from the site's Origin changes them, and a change with any
 * bad part (a name with a control or invisible character, too long or empty, a zone that is not an
 * IANA name, a field the window has no place for) is a 400 that changes nothing. The names reach
 * the windows' views of a request; the zone is the one an allowance is signed in.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createIdentityHandlers, type IdentityHandler, sessionCookieName } from '../../identity/identity-http';
import { openHousehold, serverTimeZone } from '../../identity/index';
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

/** Both members enrolled; their cookies. */
async function members() {
  const parent = await h.enrol('parent');
  const child = await h.enrol('child');
  return {
    parent,
    parentCookie: `${sessionCookieName('parent')}=${parent.session.token}`,
    childCookie: `${sessionCookieName('child')}=${child.session.token}`,
  };
}

const change = (cookie: string, body: unknown, as = 'parent', from = origin) =>
  call(handlers.householdUpdate, `/api/identity/household?as=${as}`, { body, cookie, origin: from });
const read = (cookie: string, as = 'parent') =>
  call(handlers.household, `/api/identity/household?as=${as}`, { cookie });

describe("the parent names the household's members and sets its time zone", () => {
  it('starts with no names and the zone the server runs in; either window reads what the parent sets', async () => {
    const { parentCookie, childCookie } = await members();
    expect(await read(parentCookie)).toStrictEqual({
      status: 200,
      json: { members: {}, timeZone: serverTimeZone() },
    });
    // Trimmed, NFC ("Zoe" with a combining accent becomes one character), any script.
    const changed = await change(parentCookie, {
      names: { parent: '  Alex ', child: 'Zoe\u0301' },
      timeZone: 'europe/paris',
    });
    expect(changed).toStrictEqual({
      status: 200,
      json: { members: { child: 'Zo\u00e9', parent: 'Alex' }, timeZone: 'Europe/Paris' },
    });
    expect(await read(childCookie, 'child')).toStrictEqual(changed);
    // One name at a time: the other stays.
    expect(await change(parentCookie, { names: { child: 'Sam' } })).toMatchObject({
      status: 200,
      json: { members: { child: 'Sam', parent: 'Alex' }, timeZone: 'Europe/Paris' },
    });
    expect(await change(parentCookie, { names: { child: '山田 花子' } })).toMatchObject({
      status: 200,
      json: { members: { child: '山田 花子' } },
    });
  });

  it("the names reach the windows' view of a request, and the zone is the one an allowance is signed in", async () => {
    const { parentCookie, childCookie } = await members();
    await change(parentCookie, { names: { parent: 'Alex', child: 'Sam' }, timeZone: 'Asia/Tokyo' });
    const order = await h.requestApproval(1500);
    const pending = await call(handlers.pending, '/api/identity/pending?as=parent', { cookie: parentCookie });
    expect(pending.json.approvals).toEqual([
      expect.objectContaining({ approvalId: order.approvalId, members: { child: 'Sam', parent: 'Alex' } }),
    ]);
    expect((await h.approvals.get(order.approvalId))?.members).toStrictEqual({ child: 'Sam', parent: 'Alex' });
    const child = await call(handlers.pending, '/api/identity/pending?as=child', { cookie: childCookie });
    expect(child.json.approvals).toEqual([expect.objectContaining({ members: { child: 'Sam', parent: 'Alex' } })]);

    const begun = await call(handlers.allowanceOptions, '/api/identity/allowance/options?as=parent', {
      body: {
        merchantDid: h.merchant.did,
        perOrderCapCents: 500,
        budgetCents: 1000,
        period: 'day',
        timeZone: 'Asia/Tokyo',
        expiresAt: Math.floor(h.clock.now().getTime() / 1000) + 24 * 60 * 60,
      },
      cookie: parentCookie,
    });
    expect(begun, begun.json.error).toMatchObject({ status: 200, json: { terms: { timeZone: 'Asia/Tokyo' } } });
  });

  it("a household's zone is stored at its first open and kept by every later one", async () => {
    const { dataDir, householdStore } = h;
    const stored = await householdStore.identity.profile.timeZone();
    expect(stored?.timeZone).toBe(serverTimeZone());
    // Another start, told another default, keeps the zone the household has.
    await openHousehold({ store: householdStore.identity, dataDir, timeZone: 'Asia/Tokyo' });
    expect(await householdStore.identity.profile.timeZone()).toStrictEqual(stored);
    await expect(openHousehold({ store: householdStore.identity, dataDir, timeZone: 'Mars/Olympus' })).rejects.toThrow(
      /not an IANA time zone/,
    );
  });
});

describe('refusals: a clear 4xx, nothing changed', () => {
  it.each([
    ['a zone that is not one', { timeZone: 'Mars/Olympus' }, /timeZone: an IANA time zone name/],
    ['a zone with other characters', { timeZone: 'Europe/Paris; DROP' }, /timeZone: an IANA time zone name/],
    ['an empty name', { names: { child: '   ' } }, /names\.child: a name cannot be empty/],
    ['a name over 40 characters', { names: { child: 'S'.repeat(41) } }, /at most 40 characters/],
    ['a control character', { names: { child: 'Sam\u0007' } }, /no control or invisible characters/],
    ['a line break', { names: { parent: 'Alex\nparent approved' } }, /no control or invisible characters/],
    ['a right-to-left override', { names: { child: '\u202Emas' } }, /no control or invisible characters/],
    ['a zero-width space', { names: { child: 'Sa\u200Bm' } }, /no control or invisible characters/],
    ['a name that is not text', { names: { child: 7 } }, /names\.child/],
    ['a member the household has no place for', { names: { admin: 'Eve' } }, /admin/],
    ['a field the window has no place for', { role: 'parent', timeZone: 'Europe/Paris' }, /role/],
    ['nothing to change', {}, /say what to change/],
    // One bad part refuses the whole change: the good name is not stored either.
    ['a good name with a bad zone', { names: { child: 'Sam' }, timeZone: 'Nowhere/Land' }, /timeZone/],
  ])('%s', async (_name, body, error) => {
    const { parentCookie } = await members();
    const before = await read(parentCookie);
    const refused = await change(parentCookie, body);
    expect(refused.status).toBe(400);
    expect(refused.json.error).toMatch(error);
    expect(await read(parentCookie)).toStrictEqual(before);
  });

  it("only the parent's session, only from the site's origin", async () => {
    const { parentCookie, childCookie } = await members();
    const before = await read(parentCookie);
    const body = { names: { child: 'Mum' }, timeZone: 'Europe/Paris' };
    // The child's window may read, never change: a name the child chose could read as someone else.
    expect(await change(childCookie, body, 'child')).toMatchObject({
      status: 403,
      json: { error: "only the parent changes the household's names and time zone" },
    });
    // The child's cookie in the parent's window speaks for nobody.
    expect(await change(childCookie, body)).toMatchObject({ status: 401 });
    expect(await change('', body)).toMatchObject({ status: 401 });
    expect(await change(parentCookie, body, 'parent', 'http://localhost:3001')).toMatchObject({
      status: 403,
      json: { error: 'requests from http://localhost:3001 are not accepted' },
    });
    expect(await read('')).toMatchObject({ status: 401 });
    expect(await read(parentCookie)).toStrictEqual(before);
  });
});
