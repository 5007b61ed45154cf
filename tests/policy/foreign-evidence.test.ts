import { createHash, generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { base58 } from '@scure/base';
import { exportJWK, generateKeyPair, jwtVerify, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createHostBuiltins, keyFromDidKey } from '../../proxy/policy/index';

/**
 * The signature builtins against evidence made by other implementations: JWS signed by `jose`, and a
 * passkey assertion captured from Chromium's virtual authenticator (`fixtures/capture-webauthn.ts`).
 * The project's own signer is tested in `proxy/policy/host-builtins.test.ts`; agreeing only with
 * ourselves would not catch an encoding both sides get wrong the same way.
 */

const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
const jwk = await exportJWK(publicKey);
const other = await exportJWK((await generateKeyPair('EdDSA', { crv: 'Ed25519' })).publicKey);

describe('io.jwt.verify_eddsa with JWS signed by jose', () => {
  const builtins = createHostBuiltins();
  const claims = { jti: 'urn:uuid:7b0c4f3e-1111-4222-8333-444455556666', amount: 1500 };

  /** A compact JWS from jose's own signer with the given header alg. */
  const signWithJose = (alg: 'EdDSA' | 'Ed25519') =>
    new SignJWT(claims).setProtectedHeader({ alg }).setIssuedAt().sign(privateKey);

  it.each(['EdDSA', 'Ed25519'] as const)('accepts alg %s, with the key as an object or as JSON text', async (alg) => {
    const jws = await signWithJose(alg);
    // jose itself accepts what it signed, so a disagreement below is ours.
    await expect(jwtVerify(jws, publicKey, { algorithms: [alg] })).resolves.toMatchObject({ payload: claims });
    expect(JSON.parse(Buffer.from(jws.split('.')[0] ?? '', 'base64url').toString('utf8'))).toEqual({ alg });
    expect(builtins.jwtVerifyEddsa(jws, jwk)).toBe(true);
    expect(builtins.jwtVerifyEddsa(jws, JSON.stringify(jwk))).toBe(true);
  });

  it.each(['EdDSA', 'Ed25519'] as const)('alg %s: a tampered payload or another key is false', async (alg) => {
    const [header, , signature] = (await signWithJose(alg)).split('.');
    const tampered = Buffer.from(JSON.stringify({ ...claims, amount: 150_000 })).toString('base64url');
    expect(builtins.jwtVerifyEddsa(`${header}.${tampered}.${signature}`, jwk)).toBe(false);
    expect(builtins.jwtVerifyEddsa(await signWithJose(alg), other)).toBe(false);
  });

  it("key_from_did_key gives back jose's x for a did:key derived independently from jose's key", () => {
    // did:key = "did:key:z" + base58btc(multicodec 0xed01 || raw 32-byte key), built here without the builtin.
    const raw = Buffer.from(jwk.x ?? '', 'base64url');
    expect(raw).toHaveLength(32);
    const did = `did:key:z${base58.encode(Uint8Array.from([0xed, 0x01, ...raw]))}`;
    expect(did).toMatch(/^did:key:z6Mk/);
    expect(keyFromDidKey(did)).toEqual({ kty: 'OKP', crv: 'Ed25519', x: jwk.x });
    expect(builtins.keyFromDidKey(did)).toEqual({ kty: 'OKP', crv: 'Ed25519', x: jwk.x });
  });
});

/** The committed capture; regenerate with `npx tsx tests/policy/fixtures/capture-webauthn.ts`. */
const webauthnFixtureSchema = z.object({
  rpId: z.string(),
  origin: z.string(),
  challengeText: z.string(),
  challenge: z.string(),
  publicKeyJwk: z.object({ kty: z.literal('EC'), crv: z.literal('P-256'), x: z.string(), y: z.string() }),
  authenticatorData: z.string(),
  clientDataJSON: z.string(),
  signature: z.string(),
});

describe('verify_webauthn with an assertion captured from Chromium', () => {
  const fixture = webauthnFixtureSchema.parse(
    JSON.parse(readFileSync(new URL('fixtures/webauthn-assertion.json', import.meta.url), 'utf8')),
  );
  const builtins = createHostBuiltins({ webauthn: { rpId: fixture.rpId } });
  const { authenticatorData, clientDataJSON, signature, publicKeyJwk } = fixture;

  it('is the ceremony the policy expects: rpId localhost, the fixed challenge, the page origin', () => {
    expect(fixture.rpId).toBe('localhost');
    const clientData = JSON.parse(Buffer.from(clientDataJSON, 'base64url').toString('utf8'));
    expect(clientData).toMatchObject({ type: 'webauthn.get', challenge: fixture.challenge, origin: fixture.origin });
    expect(fixture.challenge).toBe(createHash('sha256').update(fixture.challengeText).digest('base64url'));
  });

  it('verifies for rpId localhost, with the key as an object or as JSON text', () => {
    expect(builtins.verifyWebauthn(authenticatorData, clientDataJSON, signature, publicKeyJwk)).toBe(true);
    expect(builtins.verifyWebauthn(authenticatorData, clientDataJSON, signature, JSON.stringify(publicKeyJwk))).toBe(
      true,
    );
  });

  it('is false with one signature byte flipped', () => {
    const bytes = Buffer.from(signature, 'base64url');
    // The last byte is inside the DER integer s, so the encoding stays well-formed and the ECDSA check decides.
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 0x01;
    expect(builtins.verifyWebauthn(authenticatorData, clientDataJSON, bytes.toString('base64url'), publicKeyJwk)).toBe(
      false,
    );
  });

  it('is false for a relying party other than the one the passkey was made for', () => {
    const elsewhere = createHostBuiltins({ webauthn: { rpId: 'example.com' } });
    expect(elsewhere.verifyWebauthn(authenticatorData, clientDataJSON, signature, publicKeyJwk)).toBe(false);
  });

  it('is false when clientDataJSON is altered (another challenge, still webauthn.get)', () => {
    const clientData = JSON.parse(Buffer.from(clientDataJSON, 'base64url').toString('utf8'));
    const altered = Buffer.from(JSON.stringify({ ...clientData, challenge: 'c29tZXRoaW5nLWVsc2U' })).toString(
      'base64url',
    );
    expect(builtins.verifyWebauthn(authenticatorData, altered, signature, publicKeyJwk)).toBe(false);
  });

  it('is false when the signature counter in authenticatorData is altered', () => {
    const bytes = Buffer.from(authenticatorData, 'base64url');
    // Bytes 33..36 are the counter: flags and rpIdHash stay valid, so only the signature can catch it.
    bytes[36] = (bytes[36] ?? 0) ^ 0x80;
    expect(builtins.verifyWebauthn(bytes.toString('base64url'), clientDataJSON, signature, publicKeyJwk)).toBe(false);
  });

  it('is false under a different P-256 key', () => {
    const otherKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
    expect(builtins.verifyWebauthn(authenticatorData, clientDataJSON, signature, otherKey)).toBe(false);
  });
});
