import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { fixtureParty, signCompact } from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import { createHostBuiltins, didKeyFromEd25519, keyFromDidKey } from './host-builtins';

const builtins = createHostBuiltins({ webauthn: { rpId: 'localhost' } });
const party = fixtureParty('builtins');
/** The Ed25519 example of the W3C did:key spec and its JWK `x`: a vector from outside this project. */
const SPEC_DID = 'did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK';
const SPEC_X = 'Lm_M42cB3HkUiODQsXRcweM6TByfzEHGO9ND274JcOY';

describe('host builtins', () => {
  it('io.jwt.verify_eddsa accepts EdDSA and Ed25519 headers and rejects others', () => {
    expect(builtins.jwtVerifyEddsa(signCompact(party, '{}'), party.jwk)).toBe(true);
    expect(builtins.jwtVerifyEddsa(signCompact(party, '{}', { alg: 'Ed25519' }), JSON.stringify(party.jwk))).toBe(true);
    expect(builtins.jwtVerifyEddsa(signCompact(party, '{}', { alg: 'none' }), party.jwk)).toBe(false);
    expect(builtins.jwtVerifyEddsa(signCompact(party, '{}', { alg: 'EdDSA', crit: ['x'] }), party.jwk)).toBe(false);
    expect(builtins.jwtVerifyEddsa('a.b', party.jwk)).toBe(false);
    expect(builtins.jwtVerifyEddsa(signCompact(party, '{}'), fixtureParty('other').jwk)).toBe(false);
  });

  it('io.jwt.verify_eddsa remembers a valid signature per key, never a forged one or another key', () => {
    const fresh = createHostBuiltins();
    const token = signCompact(party, '{"n":1}');
    const [header, payload, signature = ''] = token.split('.');
    const forged = `${header}.${payload}.${signature.slice(0, -2)}${signature.endsWith('AA') ? 'AB' : 'AA'}`;
    expect(fresh.jwtVerifyEddsa(token, party.jwk)).toBe(true);
    expect(fresh.jwtVerifyEddsa(token, party.jwk)).toBe(true);
    expect(fresh.jwtVerifyEddsa(forged, party.jwk)).toBe(false);
    expect(fresh.jwtVerifyEddsa(token, fixtureParty('other').jwk)).toBe(false);
    expect(fresh.jwtVerifyEddsa(token, JSON.stringify(party.jwk))).toBe(true);
  });

  it('io.jwt.verify_eddsa throws on a bad key (an error, not a denial)', () => {
    expect(() => builtins.jwtVerifyEddsa('a.b.c', { kty: 'EC' })).toThrow(/malformed/);
    expect(() => builtins.jwtVerifyEddsa('a.b.c', 'not json')).toThrow();
  });

  it('did:key round-trips to the Ed25519 JWK and malformed ids give null', () => {
    const raw = Buffer.from(party.jwk.x, 'base64url');
    const did = didKeyFromEd25519(raw);
    expect(did).toMatch(/^did:key:z6Mk/);
    expect(keyFromDidKey(did)).toEqual(party.jwk);
    expect(keyFromDidKey('did:key:zNotBase58!')).toBeNull();
    expect(keyFromDidKey('did:web:example.com')).toBeNull();
    expect(keyFromDidKey(42)).toBeNull();
  });

  it('did:key decodes the did:key spec example both ways, with or without a fragment', () => {
    expect(keyFromDidKey(SPEC_DID)).toEqual({ kty: 'OKP', crv: 'Ed25519', x: SPEC_X });
    expect(keyFromDidKey(`${SPEC_DID}#${SPEC_DID.slice('did:key:'.length)}`)).toEqual({
      kty: 'OKP',
      crv: 'Ed25519',
      x: SPEC_X,
    });
    expect(didKeyFromEd25519(Buffer.from(SPEC_X, 'base64url'))).toBe(SPEC_DID);
  });

  it.each([
    // base58btc leaves out 0, O, I and l: one of them in an otherwise valid identifier is malformed.
    ...['0', 'O', 'I', 'l'].map((char) => [`the non-base58 character ${char}`, `${SPEC_DID.slice(0, -1)}${char}`]),
    ['an empty identifier', 'did:key:z'],
    ['a truncated key', SPEC_DID.slice(0, -2)],
    ['an overlong identifier', `did:key:z${'2'.repeat(200)}`],
    ['a secp256k1 key (multicodec 0xe7)', 'did:key:zQ3shQo6TF2moaqMTrUZEM1jeuYRQXeHEx4evX9751y2qPqRA'],
    ['another multibase (base32 b)', 'did:key:bafkqaaa'],
  ])('did:key with %s is null', (_label, did) => {
    expect(keyFromDidKey(did)).toBeNull();
    expect(builtins.keyFromDidKey(did)).toBeNull();
  });

  it('sha256, base64url and parse_json behave as specified', () => {
    expect(builtins.sha256Hex('abc')).toBe(createHash('sha256').update('abc').digest('hex'));
    expect(builtins.base64urlDecode(builtins.base64urlEncodeNoPad('héllo'))).toBe('héllo');
    expect(() => builtins.base64urlDecode('***')).toThrow();
    expect(builtins.parseJson('{"a":1}')).toEqual({ a: 1 });
    expect(builtins.parseJson('nope')).toBeNull();
  });

  describe('verify_webauthn', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = publicKey.export({ format: 'jwk' });
    const assertion = (options: { rpId?: string; flags?: number; type?: string } = {}) => {
      const rpIdHash = createHash('sha256')
        .update(options.rpId ?? 'localhost')
        .digest();
      const authData = Buffer.concat([rpIdHash, Buffer.from([options.flags ?? 0x05]), Buffer.from([0, 0, 0, 1])]);
      const clientData = Buffer.from(
        JSON.stringify({ type: options.type ?? 'webauthn.get', challenge: 'abc', origin: 'http://localhost:3000' }),
      );
      const signature = sign(
        'sha256',
        Buffer.concat([authData, createHash('sha256').update(clientData).digest()]),
        privateKey,
      );
      return [
        authData.toString('base64url'),
        clientData.toString('base64url'),
        signature.toString('base64url'),
      ] as const;
    };

    it('verifies a well-formed assertion', () => {
      expect(builtins.verifyWebauthn(...assertion(), jwk)).toBe(true);
    });

    it('refuses another rpId, missing UV, the wrong type, and a tampered signature', () => {
      expect(builtins.verifyWebauthn(...assertion({ rpId: 'evil.example' }), jwk)).toBe(false);
      expect(builtins.verifyWebauthn(...assertion({ flags: 0x01 }), jwk)).toBe(false);
      expect(builtins.verifyWebauthn(...assertion({ type: 'webauthn.create' }), jwk)).toBe(false);
      const [authData, clientData] = assertion();
      expect(builtins.verifyWebauthn(authData, clientData, 'AAAA', jwk)).toBe(false);
    });

    it('is an error without a configured rpId or with a bad key', () => {
      expect(() => createHostBuiltins().verifyWebauthn(...assertion(), jwk)).toThrow(/rpId/);
      expect(() => builtins.verifyWebauthn(...assertion(), party.jwk)).toThrow(/P-256/);
    });

    it('never reuses a key cached by its JSON text for the other algorithm', () => {
      const text = JSON.stringify(jwk);
      expect(builtins.verifyWebauthn(...assertion(), text)).toBe(true);
      expect(() => builtins.jwtVerifyEddsa(signCompact(party, '{}'), text)).toThrow(/Ed25519/);
      const edText = JSON.stringify(party.jwk);
      expect(builtins.jwtVerifyEddsa(signCompact(party, '{}'), edText)).toBe(true);
      expect(() => builtins.verifyWebauthn(...assertion(), edText)).toThrow(/P-256/);
    });
  });
});
