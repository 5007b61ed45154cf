import { createPublicKey } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { enrollmentCodeLifetimeMs, enrollmentFailureLimit } from '../../identity/enrollment-codes';
import { ceremonyLifetimeMs } from '../../identity/passkeys';
import type { Role } from '../../identity/store';
import { createVeramoVerifier } from '../../identity/veramo-verifier';
import { createCredentialVerifier, householdKeys } from '../../identity/verify-credential';
import { verifyOrderApproval } from '../../identity/verify-order-approval';
import { verifyAssertionFast, verifyAssertionWithSimpleWebAuthn } from '../../identity/verify-passkey-assertion';
import type { AssertionOverrides, RegistrationOverrides, SoftwareAuthenticator } from './software-authenticator';
import { createIdentityHarness, type IdentityHarness, origin, rpId } from './support';

let h: IdentityHarness;
beforeEach(async () => {
  h = await createIdentityHarness();
});
afterEach(async () => {
  await h.close();
});

const otherChallenge = Buffer.alloc(32, 7).toString('base64url');

/** Starts a registration with `code` and answers it with a fresh authenticator, breaking what `overrides` names. */
async function register(code: string, overrides: RegistrationOverrides = {}, authenticator = h.authenticator()) {
  const started = await h.passkeys.registration.options({ code });
  if (!started.ok) return started;
  return h.passkeys.registration.verify({
    ceremonyId: started.ceremonyId,
    response: authenticator.register(started.options, overrides),
  });
}

/** Signs in with the authenticator, optionally hinting a role, breaking what `overrides` names. */
async function signIn(authenticator: SoftwareAuthenticator, role?: Role, overrides: AssertionOverrides = {}) {
  const started = await h.passkeys.signIn.options(role === undefined ? {} : { role });
  if (!started.ok) throw new Error(started.reason);
  return h.passkeys.signIn.verify({
    ceremonyId: started.ceremonyId,
    response: authenticator.assert(started.options, overrides),
  });
}

describe('registration', () => {
  it('enrols the passkey for the code role, issues the PasskeyEnrollment with its P-256 key, signs the member in', async () => {
    const { child: code = '' } = await h.codes();
    const authenticator = h.authenticator();
    const result = await register(code, {}, authenticator);
    expect(result).toMatchObject({ verified: true, session: { role: 'child', memberDid: h.household.members.child } });
    if (!('verified' in result) || !result.verified) return;
    const [credential] = authenticator.credentials;
    const stored = await h.householdStore.identity.passkeys.get(credential?.id ?? '');
    expect(stored).toMatchObject({
      role: 'child',
      memberDid: h.household.members.child,
      userHandle: credential?.userHandle,
    });
    // The JWK stored and carried by the VC is the authenticator's key.
    const jwk = credential?.publicKey.export({ format: 'jwk' });
    expect(stored?.publicKeyJwk).toEqual({ kty: 'EC', crv: 'P-256', x: jwk?.x, y: jwk?.y });
    expect(() => createPublicKey({ key: { ...stored?.publicKeyJwk }, format: 'jwk' })).not.toThrow();
    // The admin-signed enrollment verifies with both verifiers and names this credential and key.
    for (const verify of [
      createCredentialVerifier(householdKeys(h.household)),
      createVeramoVerifier({ adminDocument: h.household.adminDocument }),
    ]) {
      const verdict = await verify(stored?.enrollment ?? '', {
        type: 'PasskeyEnrollment',
        issuer: h.household.adminDid,
        now: h.clock.now(),
      });
      expect(verdict).toMatchObject({
        verified: true,
        credential: {
          sub: h.household.members.child,
          subject: { role: 'child', credentialId: credential?.id, publicKeyJwk: stored?.publicKeyJwk },
        },
      });
    }
    // The code is used; the session is stored by hash only.
    expect((await h.householdStore.identity.enrollment.getCode('child'))?.usedAt).toBe(h.clock.now().getTime());
    expect(h.events).toContainEqual({
      kind: 'passkey-enrolled',
      role: 'child',
      memberDid: h.household.members.child,
      credentialId: credential?.id,
    });
    const logged = JSON.stringify(h.events);
    expect(logged).not.toContain(code.slice(6));
    expect(logged).not.toContain(result.session.token);
  });

  it('takes the role from the code, never from the request', async () => {
    const { child: code = '' } = await h.codes();
    const started = await h.passkeys.registration.options({ code, role: 'parent' } as { code: string });
    if (!started.ok) throw new Error(started.reason);
    expect(started.options.user.name).toBe('child');
    const result = await h.passkeys.registration.verify({
      ceremonyId: started.ceremonyId,
      response: { ...h.authenticator().register(started.options), role: 'parent' } as never,
    });
    expect(result).toMatchObject({ verified: true, session: { role: 'child' } });
    expect(await h.householdStore.identity.passkeys.listByRole('parent')).toEqual([]);
  });

  it('asks for UV, attestation none, ES256 only and excludes the role’s enrolled passkeys', async () => {
    const { authenticator } = await h.enrol('child');
    const { child: code = '' } = await h.codes(['child']);
    const started = await h.passkeys.registration.options({ code });
    if (!started.ok) throw new Error(started.reason);
    expect(started.options.attestation).toBe('none');
    expect(started.options.authenticatorSelection).toMatchObject({
      userVerification: 'required',
      residentKey: 'preferred',
    });
    expect(started.options.pubKeyCredParams.map((parameter) => parameter.alg)).toEqual([-7]);
    expect(started.options.excludeCredentials?.map((credential) => credential.id)).toEqual(
      authenticator.credentials.map((credential) => credential.id),
    );
    expect(started.options.rp.id).toBe(rpId);
  });

  const refusals: Array<[string, RegistrationOverrides, string]> = [
    ['wrong type', { type: 'webauthn.get' }, 'wrong clientData type (expected webauthn.create)'],
    ['wrong challenge', { challenge: otherChallenge }, 'challenge does not match this ceremony'],
    ['wrong origin', { origin: 'http://evil.example' }, 'origin does not match this site'],
    ['wrong rpIdHash', { rpId: 'evil.example' }, 'rpIdHash does not match this relying party'],
    ['UP missing', { flags: { up: false } }, 'user presence (UP) flag missing'],
    ['UV missing', { flags: { uv: false } }, 'user verification (UV) flag missing'],
    ['packed self-attestation', { fmt: 'packed' }, 'attestation format "packed" refused: only "none" is accepted'],
    ['fido-u2f attestation', { fmt: 'fido-u2f' }, 'attestation format "fido-u2f" refused: only "none" is accepted'],
    ['crossOrigin true', { crossOrigin: true }, 'cross-origin ceremony refused (crossOrigin is true)'],
    ['a topOrigin', { topOrigin: 'http://evil.example' }, 'cross-origin ceremony refused (topOrigin present)'],
  ];
  it.each(refusals)('refuses %s, keeps the code usable, enrols nothing', async (_name, overrides, reason) => {
    const { child: code = '' } = await h.codes();
    expect(await register(code, overrides)).toEqual({ ok: false, verified: false, reason, code: expect.any(String) });
    expect(await h.householdStore.identity.passkeys.listByRole('child')).toEqual([]);
    expect(h.events).toContainEqual({ kind: 'enrollment-refused', role: 'child', reason });
    // The refused ceremony did not burn the code.
    expect(await register(code)).toMatchObject({ verified: true });
  });

  it('refuses a used code, and a second registration racing on the same code', async () => {
    const { child: code = '' } = await h.codes();
    const first = await h.passkeys.registration.options({ code });
    const second = await h.passkeys.registration.options({ code });
    if (!first.ok || !second.ok) throw new Error('options refused');
    const [a, b] = [h.authenticator(), h.authenticator()];
    expect(
      await h.passkeys.registration.verify({ ceremonyId: first.ceremonyId, response: a.register(first.options) }),
    ).toMatchObject({
      verified: true,
    });
    expect(
      await h.passkeys.registration.verify({ ceremonyId: second.ceremonyId, response: b.register(second.options) }),
    ).toMatchObject({
      verified: false,
      reason: 'this enrollment code was already used or has expired; ask the operator for a new one',
    });
    expect(await h.passkeys.registration.options({ code })).toMatchObject({
      ok: false,
      reason: 'this enrollment code was already used; ask the operator for a new one',
    });
    expect(await h.householdStore.identity.passkeys.listByRole('child')).toHaveLength(1);
  });

  it('a cancelled prompt does not burn the code', async () => {
    const { child: code = '' } = await h.codes();
    expect((await h.passkeys.registration.options({ code })).ok).toBe(true);
    expect(await register(code)).toMatchObject({ verified: true });
  });

  it('refuses an expired code, at options and when it expires during the ceremony', async () => {
    const { child: code = '', parent: parentCode = '' } = await h.codes();
    h.clock.advance(enrollmentCodeLifetimeMs - 60_000);
    const started = await h.passkeys.registration.options({ code });
    if (!started.ok) throw new Error(started.reason);
    h.clock.advance(120_000);
    const response = h.authenticator().register(started.options);
    expect(await h.passkeys.registration.verify({ ceremonyId: started.ceremonyId, response })).toMatchObject({
      verified: false,
      reason: 'this enrollment code was already used or has expired; ask the operator for a new one',
    });
    expect(await h.passkeys.registration.options({ code: parentCode })).toMatchObject({
      ok: false,
      reason: 'this enrollment code has expired; ask the operator to rotate codes',
    });
  });

  it('refuses a wrong code, then throttles the window (source) after too many', async () => {
    const { child: code = '' } = await h.codes();
    const source = 'window-a';
    expect(await h.passkeys.registration.options({ code: 'child-AAAA-BBBB-CCCC', source })).toMatchObject({
      ok: false,
      reason: 'wrong enrollment code',
      code: 'forbidden',
    });
    for (let attempt = 1; attempt < enrollmentFailureLimit; attempt++) {
      await h.passkeys.registration.options({ code: 'child-AAAA-BBBB-CCCC', source });
    }
    expect(await h.passkeys.registration.options({ code, source })).toMatchObject({
      ok: false,
      reason: 'too many wrong codes for child from this window, wait 15 minutes and try again',
      code: 'rate-limited',
    });
    expect(await h.passkeys.registration.options({ code, source: 'window-b' })).toMatchObject({ ok: true });
  });

  it('a ceremony verifies once, and not after it expires', async () => {
    const { child: code = '', parent: parentCode = '' } = await h.codes();
    const started = await h.passkeys.registration.options({ code });
    if (!started.ok) throw new Error(started.reason);
    const response = h.authenticator().register(started.options);
    expect(await h.passkeys.registration.verify({ ceremonyId: started.ceremonyId, response })).toMatchObject({
      verified: true,
    });
    expect(await h.passkeys.registration.verify({ ceremonyId: started.ceremonyId, response })).toMatchObject({
      verified: false,
      reason: 'unknown or already used registration ceremony; start again',
    });
    const late = await h.passkeys.registration.options({ code: parentCode });
    if (!late.ok) throw new Error(late.reason);
    h.clock.advance(ceremonyLifetimeMs);
    expect(
      await h.passkeys.registration.verify({
        ceremonyId: late.ceremonyId,
        response: h.authenticator().register(late.options),
      }),
    ).toMatchObject({ verified: false, reason: 'the registration took too long; start again' });
  });
});

describe('sign-in', () => {
  it('signs in with the enrolled passkey; the session role is the passkey role; the counter moves', async () => {
    const { authenticator } = await h.enrol('parent');
    const credentialId = authenticator.credentials[0]?.id ?? '';
    const result = await signIn(authenticator);
    expect(result).toMatchObject({
      verified: true,
      session: { role: 'parent', memberDid: h.household.members.parent, credentialId },
    });
    expect((await h.householdStore.identity.passkeys.get(credentialId))?.counter).toBe(1);
    if (!result.verified) return;
    expect(await h.passkeys.findSession(result.session.token)).toMatchObject({ role: 'parent' });
    expect(h.events).toContainEqual({ kind: 'sign-in-succeeded', role: 'parent', credentialId });
  });

  it('offers the hinted role’s passkeys only, or every passkey without a hint', async () => {
    const child = await h.enrol('child');
    const parent = await h.enrol('parent');
    const ids = (authenticator: SoftwareAuthenticator) => authenticator.credentials.map((credential) => credential.id);
    const hinted = await h.passkeys.signIn.options({ role: 'child' });
    const all = await h.passkeys.signIn.options({});
    expect(hinted.ok && hinted.options.allowCredentials?.map((credential) => credential.id)).toEqual(
      ids(child.authenticator),
    );
    expect(all.ok && all.options.allowCredentials?.map((credential) => credential.id).sort()).toEqual(
      [...ids(child.authenticator), ...ids(parent.authenticator)].sort(),
    );
    expect(hinted.ok && hinted.options.userVerification).toBe('required');
  });

  const refusals: Array<[string, AssertionOverrides, string]> = [
    ['wrong type', { type: 'webauthn.create' }, 'wrong clientData type (expected webauthn.get)'],
    ['wrong challenge', { challenge: otherChallenge }, 'challenge does not match this ceremony'],
    ['wrong origin', { origin: 'http://localhost:3001' }, 'origin does not match this site'],
    ['wrong rpIdHash', { rpId: 'evil.example' }, 'rpIdHash does not match this relying party'],
    ['UP missing', { flags: { up: false } }, 'user presence (UP) flag missing'],
    ['UV missing', { flags: { uv: false } }, 'user verification (UV) flag missing'],
    ['crossOrigin true', { crossOrigin: true }, 'cross-origin ceremony refused (crossOrigin is true)'],
    ['a topOrigin', { topOrigin: 'http://evil.example' }, 'cross-origin ceremony refused (topOrigin present)'],
  ];
  it.each(refusals)('refuses %s and opens no session', async (_name, overrides, reason) => {
    const { authenticator } = await h.enrol('child');
    const credentialId = authenticator.credentials[0]?.id ?? '';
    expect(await signIn(authenticator, 'child', overrides)).toEqual({
      ok: false,
      verified: false,
      reason,
      code: expect.any(String),
    });
    expect(h.events).toContainEqual({ kind: 'passkey-refused', ceremony: 'sign-in', reason });
    // A refused assertion moves no counter.
    expect((await h.householdStore.identity.passkeys.get(credentialId))?.counter).toBe(0);
  });

  it('refuses a signature that is not over this assertion', async () => {
    const { authenticator } = await h.enrol('child');
    const started = await h.passkeys.signIn.options({});
    if (!started.ok) throw new Error(started.reason);
    const first = authenticator.assert(started.options);
    const second = authenticator.assert(started.options);
    const response = { ...first, response: { ...first.response, signature: second.response.signature } };
    expect(await h.passkeys.signIn.verify({ ceremonyId: started.ceremonyId, response })).toMatchObject({
      verified: false,
      reason: 'the passkey signature does not verify',
    });
  });

  it('refuses an unknown credential', async () => {
    await h.enrol('child');
    // A real credential the household never enrolled: registered on the authenticator, never verified.
    const stranger = h.authenticator();
    const started = await h.passkeys.registration.options({ code: (await h.codes(['parent'])).parent ?? '' });
    if (!started.ok) throw new Error(started.reason);
    stranger.register(started.options);
    const options = await h.passkeys.signIn.options({});
    if (!options.ok) throw new Error(options.reason);
    const response = stranger.assert(options.options, { credentialId: stranger.credentials[0]?.id ?? '' });
    expect(await h.passkeys.signIn.verify({ ceremonyId: options.ceremonyId, response })).toMatchObject({
      verified: false,
      reason: 'unknown credential: this passkey is not enrolled here',
    });
  });

  it('refuses a credential not in allowCredentials (the child’s passkey when signing in as parent)', async () => {
    const child = await h.enrol('child');
    await h.enrol('parent');
    const credentialId = child.authenticator.credentials[0]?.id ?? '';
    expect(await signIn(child.authenticator, 'parent', { credentialId })).toMatchObject({
      verified: false,
      reason: 'this passkey (child) is not allowed for this sign-in',
    });
  });

  it('refuses a userHandle of another member', async () => {
    const child = await h.enrol('child');
    const parent = await h.enrol('parent');
    expect(
      await signIn(child.authenticator, 'child', { userHandle: parent.authenticator.credentials[0]?.userHandle ?? '' }),
    ).toMatchObject({
      verified: false,
      reason: "userHandle does not match the passkey's member",
    });
    // No userHandle at all is fine: authenticators may omit it when allowCredentials named the credential.
    expect(await signIn(child.authenticator, 'child', { userHandle: null })).toMatchObject({ verified: true });
  });

  it('refuses a counter that goes backwards or stays, and leaves the stored counter', async () => {
    const { authenticator } = await h.enrol('child');
    const credentialId = authenticator.credentials[0]?.id ?? '';
    expect(await signIn(authenticator)).toMatchObject({ verified: true });
    expect(await signIn(authenticator)).toMatchObject({ verified: true });
    for (const counter of [1, 2]) {
      expect(await signIn(authenticator, undefined, { counter })).toMatchObject({
        verified: false,
        reason: 'sign counter went backwards: possible cloned authenticator',
      });
    }
    expect((await h.householdStore.identity.passkeys.get(credentialId))?.counter).toBe(2);
  });

  it('a sign-in ceremony verifies once, and not after it expires', async () => {
    const { authenticator } = await h.enrol('child');
    const started = await h.passkeys.signIn.options({});
    if (!started.ok) throw new Error(started.reason);
    const response = authenticator.assert(started.options);
    expect(await h.passkeys.signIn.verify({ ceremonyId: started.ceremonyId, response })).toMatchObject({
      verified: true,
    });
    expect(await h.passkeys.signIn.verify({ ceremonyId: started.ceremonyId, response })).toMatchObject({
      verified: false,
      reason: 'unknown or already used sign-in ceremony; start again',
    });
    const late = await h.passkeys.signIn.options({});
    if (!late.ok) throw new Error(late.reason);
    h.clock.advance(ceremonyLifetimeMs);
    expect(
      await h.passkeys.signIn.verify({ ceremonyId: late.ceremonyId, response: authenticator.assert(late.options) }),
    ).toMatchObject({
      verified: false,
      reason: 'the sign-in took too long; start again',
    });
  });

  it('a session expires after its lifetime and is gone after sign-out', async () => {
    const { session } = await h.enrol('child');
    expect(await h.passkeys.findSession(session.token)).toBeDefined();
    await h.passkeys.signOut(session.token);
    expect(await h.passkeys.findSession(session.token)).toBeUndefined();
    const again = await signIn((await h.enrol('parent')).authenticator);
    if (!again.verified) throw new Error(again.reason);
    h.clock.advance(again.session.expiresAt - h.clock.now().getTime());
    expect(await h.passkeys.findSession(again.session.token)).toBeUndefined();
  });
});

describe('approval', () => {
  /** Runs the approval ceremony for the session, breaking what `overrides` names. */
  async function approve(
    member: Awaited<ReturnType<IdentityHarness['enrol']>>,
    approvalId: string,
    overrides: AssertionOverrides = {},
  ) {
    const started = await h.passkeys.approval.options({ session: member.record, approvalId });
    if (!started.ok) return started;
    return h.passkeys.approval.verify({
      session: member.record,
      ceremonyId: started.ceremonyId,
      response: member.authenticator.assert(started.options, overrides),
    });
  }

  it('the challenge is the invoice hash; the OrderApproval verifies with both verifiers and carries the assertion', async () => {
    const child = await h.enrol('child');
    const { approvalId, invoiceHash } = await h.requestApproval(400);
    const started = await h.passkeys.approval.options({ session: child.record, approvalId });
    if (!started.ok) throw new Error(started.reason);
    expect(started.options.challenge).toBe(invoiceHash);
    expect(Buffer.from(started.options.challenge, 'base64url')).toHaveLength(32);
    expect(started.options.allowCredentials?.map((credential) => credential.id)).toEqual([
      child.authenticator.credentials[0]?.id,
    ]);
    const result = await h.passkeys.approval.verify({
      session: child.record,
      ceremonyId: started.ceremonyId,
      response: child.authenticator.assert(started.options),
    });
    expect(result).toMatchObject({ verified: true, record: { approvalId, status: 'approved' } });
    if (!result.verified) return;
    const approval = result.record.approvals.child ?? '';
    const passkey = await h.householdStore.identity.passkeys.get(child.authenticator.credentials[0]?.id ?? '');
    for (const [verifyCredential, verifyAssertion] of [
      [createCredentialVerifier(householdKeys(h.household)), verifyAssertionFast],
      [createVeramoVerifier({ adminDocument: h.household.adminDocument }), verifyAssertionWithSimpleWebAuthn],
    ] as const) {
      expect(
        await verifyOrderApproval(
          {
            invoice: result.record.invoice,
            approval,
            role: 'child',
            membership: h.household.memberships.child,
            enrollment: passkey?.enrollment ?? '',
          },
          {
            adminDid: h.household.adminDid,
            webauthn: { rpId, origin },
            now: h.clock.now(),
            verifyCredential,
            verifyAssertion,
          },
        ),
      ).toMatchObject({ verified: true });
    }
    expect(passkey?.counter).toBe(1);
  });

  it('over $10 needs the child and the parent, each with their own session', async () => {
    const child = await h.enrol('child');
    const parent = await h.enrol('parent');
    const { approvalId } = await h.requestApproval(1500);
    expect(await approve(child, approvalId)).toMatchObject({ verified: true, record: { status: 'pending' } });
    expect(await approve(parent, approvalId)).toMatchObject({ verified: true, record: { status: 'approved' } });
    expect(await approve(child, approvalId)).toMatchObject({
      ok: false,
      reason: 'this request is approved, not pending',
    });
  });

  it('refuses an assertion over the hash of another invoice', async () => {
    const child = await h.enrol('child');
    const a = await h.requestApproval(400);
    const b = await h.requestApproval(300);
    expect(await approve(child, a.approvalId, { challenge: b.invoiceHash })).toMatchObject({
      verified: false,
      reason: 'challenge does not match this ceremony',
    });
    expect((await h.householdStore.identity.approvals.get(a.approvalId))?.approvals).toEqual({});
  });

  it('refuses the child’s credential on the parent’s approval (not in allowCredentials)', async () => {
    const child = await h.enrol('child');
    const parent = await h.enrol('parent');
    const { approvalId } = await h.requestApproval(1500);
    const started = await h.passkeys.approval.options({ session: parent.record, approvalId });
    if (!started.ok) throw new Error(started.reason);
    const response = child.authenticator.assert(started.options, {
      credentialId: child.authenticator.credentials[0]?.id ?? '',
    });
    expect(
      await h.passkeys.approval.verify({ session: parent.record, ceremonyId: started.ceremonyId, response }),
    ).toMatchObject({
      verified: false,
      reason: 'this passkey (child) is not allowed for this approval',
    });
    expect((await h.householdStore.identity.approvals.get(approvalId))?.approvals).toEqual({});
  });

  it('a child session cannot finish a ceremony the parent started, nor ask for a request it is not needed on', async () => {
    const child = await h.enrol('child');
    const parent = await h.enrol('parent');
    const big = await h.requestApproval(1500);
    const started = await h.passkeys.approval.options({ session: parent.record, approvalId: big.approvalId });
    if (!started.ok) throw new Error(started.reason);
    const response = parent.authenticator.assert(started.options);
    expect(
      await h.passkeys.approval.verify({ session: child.record, ceremonyId: started.ceremonyId, response }),
    ).toMatchObject({
      verified: false,
      reason: 'this approval was started by another role',
    });
    const small = await h.requestApproval(400);
    expect(await h.passkeys.approval.options({ session: parent.record, approvalId: small.approvalId })).toMatchObject({
      ok: false,
      reason: "this request does not need the parent's approval",
      code: 'forbidden',
    });
  });

  it('the role is read from the stored session, not from the session object passed in', async () => {
    const child = await h.enrol('child');
    await h.enrol('parent');
    const { approvalId } = await h.requestApproval(1500);
    const forged = { ...child.record, role: 'parent' as const };
    const started = await h.passkeys.approval.options({ session: forged, approvalId });
    expect(started.ok && started.options.allowCredentials?.map((credential) => credential.id)).toEqual([
      child.authenticator.credentials[0]?.id,
    ]);
  });

  it('refuses a userHandle of another member and a counter going backwards', async () => {
    const child = await h.enrol('child');
    const parent = await h.enrol('parent');
    const { approvalId } = await h.requestApproval(400);
    expect(
      await approve(child, approvalId, { userHandle: parent.authenticator.credentials[0]?.userHandle ?? '' }),
    ).toMatchObject({
      verified: false,
      reason: "userHandle does not match the passkey's member",
    });
    // A sign-in moves the stored counter past 0; an approval reporting less is a clone's.
    expect(await signIn(child.authenticator)).toMatchObject({ verified: true });
    expect(await approve(child, approvalId, { counter: 1 })).toMatchObject({
      verified: false,
      reason: 'sign counter went backwards: possible cloned authenticator',
    });
    expect(h.events).toContainEqual({
      kind: 'passkey-refused',
      ceremony: 'approval',
      reason: 'sign counter went backwards: possible cloned authenticator',
    });
  });

  it('an approval ceremony verifies once, and not after it expires', async () => {
    const child = await h.enrol('child');
    const { approvalId } = await h.requestApproval(400);
    const started = await h.passkeys.approval.options({ session: child.record, approvalId });
    if (!started.ok) throw new Error(started.reason);
    h.clock.advance(ceremonyLifetimeMs);
    const response = child.authenticator.assert(started.options);
    expect(
      await h.passkeys.approval.verify({ session: child.record, ceremonyId: started.ceremonyId, response }),
    ).toMatchObject({
      verified: false,
      reason: 'the approval took too long; start again',
    });
    expect(
      await h.passkeys.approval.verify({ session: child.record, ceremonyId: started.ceremonyId, response }),
    ).toMatchObject({
      verified: false,
      reason: 'unknown or already used approval ceremony; start again',
    });
  });

  it('refuses without a live session, after sign-out and for an unknown request', async () => {
    const child = await h.enrol('child');
    const { approvalId } = await h.requestApproval(400);
    expect(await h.passkeys.approval.options({ session: child.record, approvalId: 'no-such-request' })).toMatchObject({
      ok: false,
      reason: 'no such approval request',
    });
    await h.passkeys.signOut(child.session.token);
    expect(await approve(child, approvalId)).toMatchObject({
      ok: false,
      reason: 'not signed in, or the session expired; sign in again',
      code: 'unauthenticated',
    });
  });

  it('decline and pendingFor act as the session role', async () => {
    const child = await h.enrol('child');
    const parent = await h.enrol('parent');
    const small = await h.requestApproval(400);
    const big = await h.requestApproval(1500);
    expect((await h.passkeys.pendingFor(child.record)).map((view) => view.approvalId).sort()).toEqual(
      [small.approvalId, big.approvalId].sort(),
    );
    expect((await h.passkeys.pendingFor(parent.record)).map((view) => view.approvalId)).toEqual([big.approvalId]);
    expect(await h.passkeys.decline({ session: parent.record, approvalId: small.approvalId })).toMatchObject({
      ok: false,
    });
    expect(await h.passkeys.decline({ session: parent.record, approvalId: big.approvalId })).toMatchObject({
      ok: true,
      record: { status: 'declined' },
    });
    expect(await approve(child, big.approvalId)).toMatchObject({
      ok: false,
      reason: 'this request is declined, not pending',
    });
    expect(h.events).toContainEqual({
      kind: 'approval-declined',
      approvalId: big.approvalId,
      invoiceId: big.invoiceId,
      role: 'parent',
    });
  });

  it('no event carries a code, a session token or a challenge', async () => {
    const codes = await h.codes();
    const child = await h.enrol('child');
    const { approvalId, invoiceHash } = await h.requestApproval(400);
    await approve(child, approvalId, { challenge: otherChallenge });
    await h.passkeys.registration.options({ code: 'child-AAAA-BBBB-CCCC' });
    const logged = JSON.stringify(h.events);
    for (const secret of [
      codes.child?.slice(6),
      codes.parent?.slice(6),
      child.session.token,
      invoiceHash,
      otherChallenge,
    ]) {
      expect(logged).not.toContain(secret);
    }
  });
});
