import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createIdentityHandlers, type IdentityHandler } from '../../identity/identity-http';
import type { Role } from '../../identity/store';
import { verifyAssertionFast, verifyAssertionWithSimpleWebAuthn } from '../../identity/verify-passkey-assertion';
import { familySpendTable } from '../../policies/family-spend/fixtures/family-spend-fixtures';
import { createHostBuiltins, loadBundle } from '../../proxy/index';
import type { CeremonyOverrides, SoftwareAuthenticator } from '../identity/software-authenticator';
import { createIdentityHarness, type IdentityHarness, origin, rpId } from '../identity/support';

// Issue 26 item 10: a forged clientData with `crossOrigin: "true"` (a string) passed the
// cross-origin check, which only refused the boolean `true`. Only an absent value or the boolean
// `false` is first-party; the string "true" and anything else is refused — by the ceremonies
// (registration, sign-in, approval, driven over the household's HTTP handlers with a software
// authenticator that forges the field), by the verifiers of stored evidence, and by the household
// policy on both engines.

type CrossOrigin = Exclude<CeremonyOverrides['crossOrigin'], undefined>;

/** Everything a hostile client could put in `crossOrigin` that is not the boolean `false`. */
const hostile: readonly (readonly [string, CrossOrigin])[] = [
  ['the string "true"', 'true'],
  ['the string "false"', 'false'],
  ['the number 1', 1],
  ['the number 0', 0],
  ['null', null],
  ['an empty string', ''],
  ['an object', {}],
  ['the boolean true', true],
];

let h: IdentityHarness;
let handlers: ReturnType<typeof createIdentityHandlers>;
beforeEach(async () => {
  h = await createIdentityHarness();
  handlers = createIdentityHandlers({ passkeys: h.passkeys, origin });
});
afterEach(async () => {
  await h.close();
});

/** POSTs a JSON body to a handler the way the approval window does (same origin, optional cookie). */
async function post(handler: IdentityHandler, path: string, body: unknown, cookie?: string) {
  const headers = new Headers({ origin, 'content-type': 'application/json' });
  if (cookie !== undefined) headers.set('cookie', cookie);
  const response = await handler(
    new Request(`${origin}${path}`, { method: 'POST', headers, body: JSON.stringify(body), duplex: 'half' } as never),
  );
  const json = (await response.json()) as Record<string, unknown>;
  return { status: response.status, json, cookie: response.headers.get('set-cookie')?.split(';')[0] };
}

async function register(role: Role, crossOrigin?: CrossOrigin) {
  const code = (await h.codes([role]))[role] ?? '';
  const authenticator = h.authenticator();
  const options = await post(handlers.registrationOptions, '/api/passkeys/register/options', { code });
  const verify = await post(handlers.registrationVerify, '/api/passkeys/register/verify', {
    ceremonyId: options.json.ceremonyId,
    response: authenticator.register(options.json.options as never, crossOrigin === undefined ? {} : { crossOrigin }),
  });
  return { authenticator, verify };
}

async function signIn(authenticator: SoftwareAuthenticator, role: Role, crossOrigin: CrossOrigin) {
  const options = await post(handlers.signInOptions, `/api/passkeys/sign-in/options?as=${role}`, {});
  return post(handlers.signInVerify, '/api/passkeys/sign-in/verify', {
    ceremonyId: options.json.ceremonyId,
    response: authenticator.assert(options.json.options as never, { crossOrigin }),
  });
}

describe('crossOrigin must be the boolean false or absent (issue 26 item 10)', () => {
  it.each(hostile)('registration with crossOrigin %s is refused and enrols nothing', async (_name, crossOrigin) => {
    const { verify } = await register('child', crossOrigin);
    expect(verify.status).toBe(400);
    expect(String(verify.json.error)).toMatch(/cross-origin ceremony refused/);
    expect(await h.householdStore.identity.passkeys.listByRole('child')).toEqual([]);
  });

  it.each(hostile)('sign-in with crossOrigin %s is refused and opens no session', async (_name, crossOrigin) => {
    const { authenticator } = await register('child');
    const refused = await signIn(authenticator, 'child', crossOrigin);
    expect(refused.status).toBe(400);
    expect(String(refused.json.error)).toMatch(/cross-origin ceremony refused/);
    expect(refused.cookie).toBeUndefined();
  });

  it.each(hostile)('an approval with crossOrigin %s is refused and issues no approval', async (_name, crossOrigin) => {
    const { authenticator, verify } = await register('child');
    const cookie = verify.cookie ?? '';
    const { approvalId } = await h.requestApproval(400);
    const options = await post(handlers.approvalOptions, '/api/approve/options?as=child', { approvalId }, cookie);
    expect(options.status).toBe(200);
    const refused = await post(
      handlers.approvalVerify,
      '/api/approve/verify?as=child',
      {
        ceremonyId: options.json.ceremonyId,
        response: authenticator.assert(options.json.options as never, { crossOrigin }),
      },
      cookie,
    );
    expect(refused.status).toBe(400);
    expect(String(refused.json.error)).toMatch(/cross-origin ceremony refused/);
    expect((await h.householdStore.identity.approvals.get(approvalId))?.approvals).toEqual({});
  });

  it('accepts crossOrigin false and crossOrigin absent in every ceremony', async () => {
    for (const crossOrigin of [false, 'absent'] as const) {
      await h.close();
      h = await createIdentityHarness();
      handlers = createIdentityHandlers({ passkeys: h.passkeys, origin });
      const { authenticator, verify } = await register('child', crossOrigin);
      expect(verify.status).toBe(200);
      const signedIn = await signIn(authenticator, 'child', crossOrigin);
      expect(signedIn.status).toBe(200);
      const { approvalId } = await h.requestApproval(400);
      const options = await post(
        handlers.approvalOptions,
        '/api/approve/options?as=child',
        { approvalId },
        signedIn.cookie,
      );
      const approved = await post(
        handlers.approvalVerify,
        '/api/approve/verify?as=child',
        {
          ceremonyId: options.json.ceremonyId,
          response: authenticator.assert(options.json.options as never, { crossOrigin }),
        },
        signedIn.cookie,
      );
      expect(approved).toMatchObject({ status: 200, json: { status: 'approved', role: 'child' } });
    }
  });

  it.each(hostile)('stored evidence whose assertion has crossOrigin %s does not verify', async (_name, crossOrigin) => {
    const authenticator = h.authenticator();
    const challenge = Buffer.alloc(32, 9).toString('base64url');
    authenticator.register({
      challenge: Buffer.alloc(32, 1).toString('base64url'),
      rp: { id: rpId, name: 'test' },
      user: { id: 'dXNlcg', name: 'child', displayName: 'child' },
      pubKeyCredParams: [{ type: 'public-key', alg: -7 }],
    });
    const credential = authenticator.credentials[0];
    const jwk = credential?.publicKey.export({ format: 'jwk' });
    const expected = {
      challenge,
      origin,
      rpId,
      publicKeyJwk: { kty: 'EC', crv: 'P-256', x: jwk?.x ?? '', y: jwk?.y ?? '' },
    };
    const assertionWith = (value: CrossOrigin) => {
      const { response } = authenticator.assert({ challenge, rpId }, { crossOrigin: value });
      return { credentialId: credential?.id ?? '', ...response };
    };
    for (const verifier of [verifyAssertionFast, verifyAssertionWithSimpleWebAuthn]) {
      // The same authenticator's honest assertion verifies, so the refusal is the field's alone.
      expect(await verifier(assertionWith(false), expected)).toEqual({ verified: true });
      expect(await verifier(assertionWith(crossOrigin), expected)).toEqual({
        verified: false,
        reason: 'the passkey assertion comes from a cross-origin frame',
      });
    }
  });

  it.each(['rego', 'cel'] as const)('the household policy refuses it on %s, on either leg', async (engine) => {
    const bundle = await loadBundle({
      directory: new URL('../../policies/family-spend', import.meta.url).pathname,
      builtins: createHostBuiltins({ webauthn: { rpId: 'localhost' } }),
      engine,
    });
    const rows = familySpendTable().family_spend_cases.filter((row) => /crossOrigin/.test(row.name));
    expect(rows.map((row) => row.name)).toEqual([
      'synthetic: child assertion with crossOrigin "true"',
      'synthetic: child assertion with crossOrigin "false"',
      'synthetic: child assertion with crossOrigin 1',
      'synthetic: child assertion with crossOrigin 0',
      'synthetic: child assertion with crossOrigin null',
      'synthetic: parent assertion with crossOrigin "true"',
    ]);
    for (const row of rows) {
      const leg = row.name.includes('parent') ? 'parent' : 'child';
      // The $15 order everything else approves: only the leg's origin check (and with it the
      // solo tier's limit) fails.
      const outcome = await bundle.engine.evaluate(row.input as never);
      expect(outcome.decision, row.name).toBe('deny');
      expect(outcome.decision === 'deny' ? outcome.failedChecks : [], row.name).toEqual(
        [`${leg}_passkey_origin`, 'within_child_limit'].sort(),
      );
    }
  });
});
