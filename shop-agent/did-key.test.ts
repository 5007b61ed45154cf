import { exportJWK, generateKeyPair } from 'jose';
import { describe, expect, it } from 'vitest';
import { didKeyFromJwk, jwkFromDidKey } from './did-key.js';

describe('did:key', () => {
  it('matches the did:key spec test vector', () => {
    // From the W3C CCG did:key spec (Ed25519 test vectors): x is the raw public key.
    const did = 'did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp';
    const jwk = jwkFromDidKey(did);
    expect(jwk).not.toBeNull();
    if (jwk === null) return;
    expect(didKeyFromJwk(jwk)).toEqual({
      did,
      kid: `${did}#z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp`,
      publicJwk: jwk,
    });
  });

  it('round-trips a generated Ed25519 key and uses the z6Mk prefix', async () => {
    const { publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    const jwk = await exportJWK(publicKey);
    const { did, kid, publicJwk } = didKeyFromJwk(jwk);
    expect(did).toMatch(/^did:key:z6Mk[1-9A-HJ-NP-Za-km-z]+$/);
    expect(kid.startsWith(`${did}#z6Mk`)).toBe(true);
    expect(jwkFromDidKey(did)).toEqual(publicJwk);
    expect(publicJwk.x).toBe(jwk.x);
  });

  it.each([
    'did:web:example.com',
    'did:key:z',
    'did:key:z0OIl',
    'did:key:zDnaerDaTF5BXEavCrfRZEk316dpbLsfPDZ3WJ5hRTPFU2169', // a P-256 did:key
    `did:key:z6Mk${'1'.repeat(200)}`,
  ])('returns null for %s', (did) => {
    expect(jwkFromDidKey(did)).toBeNull();
  });

  it('refuses a non-Ed25519 JWK', async () => {
    const { publicKey } = await generateKeyPair('ES256');
    const jwk = await exportJWK(publicKey);
    expect(() => didKeyFromJwk(jwk)).toThrow(/Ed25519/);
  });
});
