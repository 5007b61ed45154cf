import { base58, base64urlnopad } from '@scure/base';
import type { JWK } from 'jose';

/** multicodec varint prefix for an Ed25519 public key (0xed, as varint 0xed 0x01). */
const ED25519_PUB_PREFIX = Uint8Array.of(0xed, 0x01);
const DID_KEY_PREFIX = 'did:key:z';

/** An Ed25519 public key as a JWK (the only key type the shop uses or trusts). */
export type Ed25519PublicJwk = { kty: 'OKP'; crv: 'Ed25519'; x: string };

/** A did:key with its verification method id and public JWK. */
export type DidKey = { did: string; kid: string; publicJwk: Ed25519PublicJwk };

/**
 * did:key for an Ed25519 public JWK: `did:key:z` + base58btc(0xed01 || key). did:key is
 * self-certifying, so whoever verifies the shop's signatures never needs the network.
 */
export function didKeyFromJwk(jwk: JWK): DidKey {
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') {
    throw new TypeError('did:key needs an Ed25519 OKP public key');
  }
  const raw = base64urlnopad.decode(jwk.x);
  if (raw.length !== 32) throw new TypeError('an Ed25519 public key is 32 bytes');
  const multibase = `z${base58.encode(concat(ED25519_PUB_PREFIX, raw))}`;
  const did = `did:key:${multibase}`;
  return { did, kid: `${did}#${multibase}`, publicJwk: { kty: 'OKP', crv: 'Ed25519', x: jwk.x } };
}

/**
 * The Ed25519 public JWK a did:key names, or `null` when the DID is not a well-formed
 * Ed25519 did:key (fail closed: the caller treats null as "untrusted").
 */
export function jwkFromDidKey(did: string): Ed25519PublicJwk | null {
  if (!did.startsWith(DID_KEY_PREFIX) || did.length > 128) return null;
  let bytes: Uint8Array;
  try {
    bytes = base58.decode(did.slice(DID_KEY_PREFIX.length));
  } catch {
    return null;
  }
  if (bytes.length !== 34 || bytes[0] !== 0xed || bytes[1] !== 0x01) return null;
  return { kty: 'OKP', crv: 'Ed25519', x: base64urlnopad.encode(bytes.slice(2)) };
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
