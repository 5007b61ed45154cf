import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createIdentityHandlers, type IdentityHandler, maxIdentityBodyBytes } from '../../identity/identity-http';
import type { Passkeys } from '../../identity/passkeys';
import type { Role } from '../../identity/store';
import type { SoftwareAuthenticator } from './software-authenticator';
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

interface Send {
  readonly body?: unknown;
  readonly raw?: BodyInit;
  readonly origin?: string | null;
  readonly cookie?: string;
  readonly method?: string;
}

/** Calls a handler as the route would, with the site's Origin unless told otherwise. */
async function call(handler: IdentityHandler, path: string, send: Send = {}) {
  const headers = new Headers();
  const from = send.origin === undefined ? origin : send.origin;
  if (from !== null) headers.set('origin', from);
  if (send.cookie !== undefined) headers.set('cookie', send.cookie);
  const method = send.method ?? (send.body === undefined && send.raw === undefined ? 'GET' : 'POST');
  const body = send.raw ?? (send.body === undefined ? undefined : JSON.stringify(send.body));
  const response = await handler(
    new Request(`${origin}${path}`, { method, headers, ...(body === undefined ? {} : { body, duplex: 'half' }) }),
  );
  const json = (await response.json()) as Record<string, unknown> & { error?: string };
  return { status: response.status, json, setCookie: response.headers.get('set-cookie') ?? undefined };
}

/** The `name=value` of a Set-Cookie header. */
const cookiePair = (setCookie: string | undefined) => setCookie?.split(';')[0] ?? '';

/** Registers a passkey for the role over HTTP; returns the authenticator and the session cookie pair. */
async function registerOverHttp(role: Role, extra: Record<string, unknown> = {}) {
  const code = (await h.codes([role]))[role] ?? '';
  const authenticator = h.authenticator();
  const options = await call(handlers.registrationOptions, '/api/passkeys/register/options', {
    body: { code, ...extra },
  });
  expect(options.status).toBe(200);
  const verify = await call(handlers.registrationVerify, '/api/passkeys/register/verify', {
    body: {
      ceremonyId: options.json.ceremonyId,
      response: authenticator.register(options.json.options as never),
      ...extra,
    },
  });
  return { authenticator, verify, cookie: cookiePair(verify.setCookie) };
}

async function signInOverHttp(authenticator: SoftwareAuthenticator, role: Role, cookie?: string) {
  const options = await call(handlers.signInOptions, `/api/passkeys/sign-in/options?as=${role}`, { body: {} });
  expect(options.status).toBe(200);
  return call(handlers.signInVerify, '/api/passkeys/sign-in/verify', {
    body: { ceremonyId: options.json.ceremonyId, response: authenticator.assert(options.json.options as never) },
    ...(cookie === undefined ? {} : { cookie }),
  });
}

describe('registration and sessions over HTTP', () => {
  it('a role in the body is ignored: the child code enrols the child and sets only the child cookie', async () => {
    const { verify, cookie } = await registerOverHttp('child', { role: 'parent' });
    expect(verify.status).toBe(200);
    expect(verify.json).toMatchObject({ role: 'child', memberDid: h.household.members.child });
    // The token travels only in the HttpOnly cookie, never in the body.
    expect(JSON.stringify(verify.json)).not.toContain(cookie.split('=')[1]);
    expect(verify.setCookie).toMatch(
      /^emcp-session-child=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=43200$/,
    );
    expect(await h.householdStore.identity.passkeys.listByRole('parent')).toEqual([]);
  });

  it('both roles signed in side by side; ?as= picks the cookie; a cookie speaks only for its own role', async () => {
    const child = await registerOverHttp('child');
    const parent = await registerOverHttp('parent');
    const both = `${child.cookie}; ${parent.cookie}`;
    expect((await call(handlers.session, '/api/session?as=child', { cookie: both })).json).toMatchObject({
      signedIn: true,
      role: 'child',
      memberDid: h.household.members.child,
    });
    expect((await call(handlers.session, '/api/session?as=parent', { cookie: both })).json).toMatchObject({
      signedIn: true,
      role: 'parent',
      memberDid: h.household.members.parent,
    });
    expect((await call(handlers.session, '/api/session?as=parent', { cookie: child.cookie })).json).toEqual({
      signedIn: false,
      role: 'parent',
    });
    // The child's token under the parent's cookie name is not a parent session.
    const smuggled = `emcp-session-parent=${child.cookie.split('=')[1]}`;
    expect((await call(handlers.session, '/api/session?as=parent', { cookie: smuggled })).json).toMatchObject({
      signedIn: false,
    });
  });

  it('sign-in sets the cookie of the passkey role, whatever window asked', async () => {
    const { authenticator } = await registerOverHttp('parent');
    const options = await call(handlers.signInOptions, '/api/passkeys/sign-in/options', { body: { role: 'child' } });
    const verify = await call(handlers.signInVerify, '/api/passkeys/sign-in/verify', {
      body: {
        ceremonyId: options.json.ceremonyId,
        response: authenticator.assert(options.json.options as never),
        role: 'child',
      },
    });
    expect(verify.status).toBe(200);
    expect(verify.setCookie).toMatch(/^emcp-session-parent=/);
    expect(verify.json).toMatchObject({ role: 'parent' });
  });

  it('a refused sign-in is a 4xx with the reason and sets no cookie', async () => {
    const { authenticator } = await registerOverHttp('child');
    const options = await call(handlers.signInOptions, '/api/passkeys/sign-in/options?as=child', { body: {} });
    const verify = await call(handlers.signInVerify, '/api/passkeys/sign-in/verify', {
      body: {
        ceremonyId: options.json.ceremonyId,
        response: authenticator.assert(options.json.options as never, { flags: { uv: false } }),
      },
    });
    expect(verify).toEqual({
      status: 401,
      json: { error: 'user verification (UV) flag missing' },
      setCookie: undefined,
    });
  });

  it('sign-out ends that role’s session only and clears its cookie', async () => {
    const child = await registerOverHttp('child');
    const parent = await registerOverHttp('parent');
    const both = `${child.cookie}; ${parent.cookie}`;
    const out = await call(handlers.signOut, '/api/sign-out?as=child', { body: {}, cookie: both });
    expect(out.status).toBe(200);
    expect(out.setCookie).toBe('emcp-session-child=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0');
    expect((await call(handlers.session, '/api/session?as=child', { cookie: both })).json).toMatchObject({
      signedIn: false,
    });
    expect((await call(handlers.session, '/api/session?as=parent', { cookie: both })).json).toMatchObject({
      signedIn: true,
    });
    // Signing in again works, and ends the session the cookie held before.
    const again = await signInOverHttp(parent.authenticator, 'parent', parent.cookie);
    expect(again.status).toBe(200);
    expect((await call(handlers.session, '/api/session?as=parent', { cookie: parent.cookie })).json).toMatchObject({
      signedIn: false,
    });
    expect(
      (await call(handlers.session, '/api/session?as=parent', { cookie: cookiePair(again.setCookie) })).json,
    ).toMatchObject({ signedIn: true });
  });

  it('cookies are Secure when the origin is https', async () => {
    const secure = createIdentityHandlers({ passkeys: h.passkeys, origin: 'https://household.example' });
    const out = await call(secure.signOut, '/api/sign-out?as=parent', {
      body: {},
      origin: 'https://household.example',
    });
    expect(out.setCookie).toBe('emcp-session-parent=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0; Secure');
  });

  it('a wrong code is 403, the throttled window 429 (the window is named by its own cookie)', async () => {
    const wrong = await call(handlers.registrationOptions, '/r', { body: { code: 'child-AAAA-BBBB-CCCC' } });
    expect(wrong).toMatchObject({ status: 403, json: { error: 'wrong enrollment code' } });
    expect(wrong.setCookie).toMatch(
      /^emcp-window=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=43200$/,
    );
    const window = cookiePair(wrong.setCookie);
    for (let attempt = 1; attempt < 5; attempt++)
      await call(handlers.registrationOptions, '/r', { body: { code: 'child-AAAA-BBBB-CCCC' }, cookie: window });
    const code = (await h.codes()).child;
    const locked = await call(handlers.registrationOptions, '/r', { body: { code }, cookie: window });
    expect(locked).toMatchObject({
      status: 429,
      json: { error: 'too many wrong codes for child from this window, wait 15 minutes and try again' },
    });
  });
});

describe('Origin check: a foreign or missing Origin changes nothing', () => {
  it.each([
    ['missing', null, 'missing Origin header'],
    ['foreign', 'http://evil.example', 'requests from http://evil.example are not accepted'],
    ['same host, other port', 'http://localhost:3001', 'requests from http://localhost:3001 are not accepted'],
  ])('%s Origin → 403', async (_name, from, message) => {
    const code = (await h.codes()).child ?? '';
    // A wrong code from a foreign origin is not even counted.
    const refused = await call(handlers.registrationOptions, '/r', {
      body: { code: 'child-AAAA-BBBB-CCCC' },
      origin: from,
    });
    expect(refused).toMatchObject({ status: 403, json: { error: message } });
    expect(await h.householdStore.identity.enrollment.countFailures('child', 0)).toBe(0);
    // A valid registration from a foreign origin neither takes the ceremony nor uses the code.
    const options = await call(handlers.registrationOptions, '/r', { body: { code } });
    const body = {
      ceremonyId: options.json.ceremonyId,
      response: h.authenticator().register(options.json.options as never),
    };
    expect(await call(handlers.registrationVerify, '/v', { body, origin: from })).toMatchObject({ status: 403 });
    expect(await h.householdStore.identity.passkeys.listByRole('child')).toEqual([]);
    expect((await h.householdStore.identity.enrollment.getCode('child'))?.usedAt).toBeUndefined();
    expect(await call(handlers.registrationVerify, '/v', { body })).toMatchObject({ status: 200 });
  });

  it('sign-out from a foreign origin keeps the session', async () => {
    const child = await registerOverHttp('child');
    expect(
      await call(handlers.signOut, '/api/sign-out?as=child', {
        body: {},
        cookie: child.cookie,
        origin: 'http://evil.example',
      }),
    ).toMatchObject({
      status: 403,
    });
    expect((await call(handlers.session, '/api/session?as=child', { cookie: child.cookie })).json).toMatchObject({
      signedIn: true,
    });
  });
});

describe('bad input is a clear 4xx', () => {
  it('malformed JSON → 400', async () => {
    expect(await call(handlers.registrationOptions, '/r', { raw: '{"code": "child-' })).toEqual({
      status: 400,
      json: { error: 'the body must be a JSON object' },
      setCookie: undefined,
    });
    expect(await call(handlers.registrationOptions, '/r', { raw: '["child-AAAA-BBBB-CCCC"]' })).toMatchObject({
      status: 400,
      json: { error: 'the body must be a JSON object' },
    });
  });

  it('wrong types → 400 naming the field', async () => {
    expect(await call(handlers.registrationOptions, '/r', { body: { code: 42 } })).toMatchObject({
      status: 400,
      json: { error: expect.stringMatching(/^invalid request: code: /) },
    });
    expect(
      await call(handlers.signInVerify, '/v', { body: { ceremonyId: 'x', response: { id: 'not base64url!' } } }),
    ).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining('response.id: must be base64url') },
    });
  });

  it(`a body over ${maxIdentityBodyBytes} bytes → 413, with or without a Content-Length`, async () => {
    const big = JSON.stringify({ code: 'x'.repeat(maxIdentityBodyBytes) });
    expect(await call(handlers.registrationOptions, '/r', { raw: big })).toMatchObject({
      status: 413,
      json: { error: `request body larger than ${maxIdentityBodyBytes} bytes` },
    });
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let index = 0; index < 20; index++) controller.enqueue(new Uint8Array(8192).fill(32));
        controller.close();
      },
    });
    expect(await call(handlers.registrationOptions, '/r', { raw: stream })).toMatchObject({ status: 413 });
  });

  it('?as= must name a role', async () => {
    expect(await call(handlers.session, '/api/session')).toMatchObject({
      status: 400,
      json: { error: 'say which window: ?as=child or ?as=parent' },
    });
    expect(await call(handlers.session, '/api/session?as=admin')).toMatchObject({
      status: 400,
      json: { error: '?as= must be child or parent' },
    });
  });

  it('an unexpected fault is a 500 that says nothing of it', async () => {
    const faults: unknown[] = [];
    const broken = createIdentityHandlers({
      passkeys: {
        findSession: async () => {
          throw new Error('SQLITE_CORRUPT at /secret/path/household.sqlite');
        },
      } as unknown as Passkeys,
      origin,
      onUnexpectedError: (error) => faults.push(error),
    });
    expect(
      await call(broken.session, '/api/session?as=child', { cookie: `emcp-session-child=${'a'.repeat(43)}` }),
    ).toEqual({
      status: 500,
      json: { error: 'internal error' },
      setCookie: undefined,
    });
    expect(faults).toHaveLength(1);
  });
});

describe('approvals over HTTP', () => {
  it('pending, approve and decline as the cookie role; the child cookie cannot act for the parent', async () => {
    const child = await registerOverHttp('child');
    const parent = await registerOverHttp('parent');
    const big = await h.requestApproval(1500);
    const small = await h.requestApproval(400);

    const pending = await call(handlers.pending, '/api/pending?as=parent', { cookie: parent.cookie });
    expect(pending.status).toBe(200);
    expect(pending.json).toMatchObject({
      role: 'parent',
      approvals: [{ approvalId: big.approvalId, terms: { totalCents: 1500 } }],
    });
    expect(await call(handlers.pending, '/api/pending?as=parent', { cookie: child.cookie })).toMatchObject({
      status: 401,
      json: { error: 'not signed in as parent' },
    });

    // Opened for one request (`&request=<id>`): that request only, or nothing with a clear flag.
    const only = await call(handlers.pending, `/api/pending?as=child&request=${small.approvalId}`, {
      cookie: child.cookie,
    });
    expect(only.json).toEqual({
      role: 'child',
      approvals: [expect.objectContaining({ approvalId: small.approvalId })],
      calls: [],
      request: { id: small.approvalId, waiting: true },
    });
    for (const [as, id, cookie] of [
      ['child', 'no-such-request', child.cookie],
      ['parent', small.approvalId, parent.cookie],
    ] as const) {
      expect((await call(handlers.pending, `/api/pending?as=${as}&request=${id}`, { cookie })).json).toEqual({
        role: as,
        approvals: [],
        calls: [],
        request: { id, waiting: false },
      });
    }
    expect(
      await call(handlers.pending, `/api/pending?as=child&request=${'x'.repeat(201)}`, { cookie: child.cookie }),
    ).toMatchObject({ status: 400 });

    // The child's cookie cannot start or finish the parent's approval.
    expect(
      await call(handlers.approvalOptions, '/api/approve/options?as=parent', {
        body: { approvalId: big.approvalId },
        cookie: child.cookie,
      }),
    ).toMatchObject({ status: 401 });
    const parentOptions = await call(handlers.approvalOptions, '/api/approve/options?as=parent', {
      body: { approvalId: big.approvalId, role: 'child' },
      cookie: parent.cookie,
    });
    expect(parentOptions.status).toBe(200);
    const parentResponse = parent.authenticator.assert(parentOptions.json.options as never);
    expect(
      await call(handlers.approvalVerify, '/api/approve/verify?as=child', {
        body: { ceremonyId: parentOptions.json.ceremonyId, response: parentResponse },
        cookie: child.cookie,
      }),
    ).toMatchObject({ status: 403, json: { error: 'this approval was started by another role' } });

    // The child approves the small order with its own session.
    const childOptions = await call(handlers.approvalOptions, '/api/approve/options?as=child', {
      body: { approvalId: small.approvalId },
      cookie: child.cookie,
    });
    expect((childOptions.json.options as { challenge: string }).challenge).toBe(small.invoiceHash);
    const approved = await call(handlers.approvalVerify, '/api/approve/verify?as=child', {
      body: {
        ceremonyId: childOptions.json.ceremonyId,
        response: child.authenticator.assert(childOptions.json.options as never),
      },
      cookie: child.cookie,
    });
    expect(approved).toMatchObject({
      status: 200,
      json: { approvalId: small.approvalId, status: 'approved', role: 'child' },
    });

    // The parent declines the big one.
    const declined = await call(handlers.decline, '/api/decline?as=parent', {
      body: { approvalId: big.approvalId },
      cookie: parent.cookie,
    });
    expect(declined).toMatchObject({
      status: 200,
      json: { approvalId: big.approvalId, status: 'declined', role: 'parent' },
    });
    expect((await h.householdStore.identity.approvals.get(big.approvalId))?.approvals).toEqual({});
  });
});
