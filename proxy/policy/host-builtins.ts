import { createHash, createPublicKey, type JsonWebKey, type KeyObject, verify } from 'node:crypto';
import { base58 } from '@scure/base';
import { z } from 'zod';
import { ProxyError } from '../errors';
import { safeJsonParse } from './safe-json';

/** Options the host builtins need from the operator (never from the call). */
export interface HostBuiltinsOptions {
  /** WebAuthn relying party; `verify_webauthn` is an error without it. */
  readonly webauthn?: { readonly rpId: string };
  /** Remember valid EdDSA signatures per key (default true); off only to measure every verification. */
  readonly rememberVerified?: boolean;
}

/**
 * The host builtins of SPEC §4.2, shared by both engines so they decide identically.
 * Returning `false`/`null` is an ordinary denial; throwing {@link ProxyError} is an engine error.
 */
export interface HostBuiltins {
  /** `crypto.sha256(s)`: lowercase hex SHA-256 of the UTF-8 string. */
  readonly sha256Hex: (value: unknown) => string;
  /** `base64url.encode_no_pad(s)`. */
  readonly base64urlEncodeNoPad: (value: unknown) => string;
  /** `base64url_decode(s)`: UTF-8 text of a base64url string; malformed input is an error. */
  readonly base64urlDecode: (value: unknown) => string;
  /** `parse_json(s)`: the JSON value, or `null` when the text is not JSON. */
  readonly parseJson: (value: unknown) => unknown;
  /** `key_from_did_key(did)`: the Ed25519 public JWK of a `did:key`, or `null` when malformed. */
  readonly keyFromDidKey: (did: unknown) => Ed25519Jwk | null;
  /** `io.jwt.verify_eddsa(jws, jwk)`: a bad JWS is `false`; a bad key is an error. */
  readonly jwtVerifyEddsa: (jws: unknown, jwk: unknown) => boolean;
  /** `verify_webauthn(authenticatorData, clientDataJSON, signature, jwk)`: ES256 passkey assertion. */
  readonly verifyWebauthn: (
    authenticatorData: unknown,
    clientDataJson: unknown,
    signature: unknown,
    jwk: unknown,
  ) => boolean;
}

/** An Ed25519 public key as a JWK. */
export interface Ed25519Jwk {
  readonly kty: 'OKP';
  readonly crv: 'Ed25519';
  readonly x: string;
}

const ed25519JwkSchema = z.object({ kty: z.literal('OKP'), crv: z.literal('Ed25519'), x: z.string().min(1) });
const p256JwkSchema = z.object({
  kty: z.literal('EC'),
  crv: z.literal('P-256'),
  x: z.string().min(1),
  y: z.string().min(1),
});

const BASE64URL = /^[A-Za-z0-9_-]*$/;
/** Longest did:key identifier decoded: base58 decoding is quadratic, and an Ed25519 key takes 47 characters. */
const DID_KEY_IDENTIFIER_LIMIT = 128;
/** Multicodec varint prefix of an Ed25519 public key (0xed). */
const ED25519_MULTICODEC = [0xed, 0x01] as const;
const KEY_CACHE_LIMIT = 256;
/**
 * Valid signatures remembered per key: long-lived credentials (memberships, enrollments) verify
 * once. Only successes are kept, so forged tokens cannot crowd out good ones.
 */
const VERIFIED_CACHE_LIMIT = 1024;
/** WebAuthn authenticator data flags (W3C WebAuthn §6.1). */
const FLAG_USER_PRESENT = 0x01;
const FLAG_USER_VERIFIED = 0x04;

/** Builds the host builtins. Key objects are cached so repeated verification skips JWK import. */
export function createHostBuiltins(options: HostBuiltinsOptions = {}): HostBuiltins {
  const keyCache = new Map<string, KeyObject>();
  // A signature check is a pure function of the exact key and the exact JWS text, so a success can
  // be remembered; a KeyObject identity stands for the key (the key cache hands out one per key).
  const verified = new WeakMap<KeyObject, Set<string>>();

  /** Imports a JWK, throwing `builtin_failed`: a malformed configured key is an operator fault, not a denial. */
  function importKey(jwk: unknown, kind: 'Ed25519' | 'P-256'): KeyObject {
    // Rego passes the key as JSON text: the same configured key on every call is found by that text
    // before any parsing. Only text that validated below is ever stored under it.
    const textKey = typeof jwk === 'string' ? `${kind} ${jwk}` : undefined;
    const cachedByText = textKey === undefined ? undefined : keyCache.get(textKey);
    if (cachedByText) return cachedByText;
    const parsed = typeof jwk === 'string' ? safeJsonParse(jwk) : { ok: true as const, value: jwk };
    const candidate = parsed.ok ? toPlain(parsed.value) : undefined;
    const schema = kind === 'Ed25519' ? ed25519JwkSchema : p256JwkSchema;
    const result = schema.safeParse(candidate);
    if (!result.success) throw new ProxyError('builtin-failed', `malformed ${kind} public key`);
    const cacheKey = textKey ?? `${kind} ${JSON.stringify(result.data)}`;
    const cached = keyCache.get(cacheKey);
    if (cached) return cached;
    let key: KeyObject;
    try {
      key = createPublicKey({ key: result.data as JsonWebKey, format: 'jwk' });
    } catch (error) {
      throw new ProxyError('builtin-failed', `unusable ${kind} public key`, { cause: error });
    }
    if (keyCache.size >= KEY_CACHE_LIMIT) keyCache.clear();
    keyCache.set(cacheKey, key);
    return key;
  }

  return {
    sha256Hex: (value) => createHash('sha256').update(requireString(value, 'crypto.sha256'), 'utf8').digest('hex'),
    base64urlEncodeNoPad: (value) =>
      Buffer.from(requireString(value, 'base64url.encode_no_pad'), 'utf8').toString('base64url'),
    base64urlDecode: (value) => {
      const bytes = decodeBase64url(value);
      if (!bytes) throw new ProxyError('builtin-failed', 'base64url_decode: not base64url');
      return bytes.toString('utf8');
    },
    parseJson: (value) => {
      if (typeof value !== 'string') return null;
      const parsed = safeJsonParse(value);
      return parsed.ok ? parsed.value : null;
    },
    keyFromDidKey: (did) => keyFromDidKey(did),
    jwtVerifyEddsa: (jws, jwk) => {
      // The key is the operator's: import it first so a bad key is an error whatever the token.
      const key = importKey(jwk, 'Ed25519');
      // 1. Compact JWS: exactly three base64url segments.
      if (typeof jws !== 'string') return false;
      if (verified.get(key)?.has(jws)) return true;
      if (!verifyCompactEddsa(jws, key)) return false;
      if (options.rememberVerified === false) return true;
      const remembered = verified.get(key) ?? new Set<string>();
      if (remembered.size >= VERIFIED_CACHE_LIMIT) remembered.clear();
      verified.set(key, remembered.add(jws));
      return true;
    },
    verifyWebauthn: (authenticatorData, clientDataJson, signature, jwk) => {
      const rpId = options.webauthn?.rpId;
      if (!rpId) throw new ProxyError('builtin-failed', 'verify_webauthn: no rpId configured');
      const key = importKey(jwk, 'P-256');
      // 1. Decode the three base64url fields of the assertion.
      const authData = decodeBase64url(authenticatorData);
      const clientData = decodeBase64url(clientDataJson);
      const signatureBytes = decodeBase64url(signature);
      if (!authData || !clientData || !signatureBytes) return false;
      // 2. clientDataJSON.type must be webauthn.get (challenge and origin are the policy's to check).
      const client = safeJsonParse(clientData.toString('utf8'));
      if (!client.ok || !isRecord(client.value) || client.value.type !== 'webauthn.get') return false;
      // 3. authenticatorData: rpIdHash (32 bytes) = SHA-256(configured rpId), then flags, then counter.
      if (authData.length < 37) return false;
      const rpIdHash = createHash('sha256').update(rpId, 'utf8').digest();
      if (!authData.subarray(0, 32).equals(rpIdHash)) return false;
      // 4. User present and user verified flags both set.
      const flags = authData[32] ?? 0;
      if ((flags & FLAG_USER_PRESENT) === 0 || (flags & FLAG_USER_VERIFIED) === 0) return false;
      // 5. ES256 (DER) over authenticatorData || SHA-256(clientDataJSON).
      const signed = Buffer.concat([authData, createHash('sha256').update(clientData).digest()]);
      try {
        return verify('sha256', signed, { key, dsaEncoding: 'der' }, signatureBytes);
      } catch {
        // A malformed DER signature comes from the caller: it is a failed verification, not an engine fault.
        return false;
      }
    },
  };
}

/** Verifies a compact EdDSA JWS (the steps after the key import and the string check). */
function verifyCompactEddsa(jws: string, key: KeyObject): boolean {
  const parts = jws.split('.');
  if (parts.length !== 3) return false;
  const [header, payload, signature] = parts as [string, string, string];
  // 2. Protected header: a JSON object whose alg is EdDSA (or the newer fully-specified Ed25519); no crit.
  const headerBytes = decodeBase64url(header);
  if (!headerBytes || !decodeBase64url(payload)) return false;
  const headerJson = safeJsonParse(headerBytes.toString('utf8'));
  if (!headerJson.ok || !isRecord(headerJson.value)) return false;
  const alg = headerJson.value.alg;
  if ((alg !== 'EdDSA' && alg !== 'Ed25519') || 'crit' in headerJson.value) return false;
  // 3. Signature: 64 bytes over the ASCII signing input `header.payload`.
  const signatureBytes = decodeBase64url(signature);
  if (signatureBytes?.length !== 64) return false;
  return verify(null, Buffer.from(`${header}.${payload}`, 'ascii'), key, signatureBytes);
}

/** Decodes a `did:key` Ed25519 identifier (multibase base58btc, multicodec 0xed01) to its JWK. */
export function keyFromDidKey(did: unknown): Ed25519Jwk | null {
  if (typeof did !== 'string' || !did.startsWith('did:key:z')) return null;
  const identifier = did.slice('did:key:z'.length).split('#')[0] ?? '';
  const bytes = decodeBase58(identifier);
  if (bytes?.length !== 34 || bytes[0] !== ED25519_MULTICODEC[0] || bytes[1] !== ED25519_MULTICODEC[1]) return null;
  return { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(bytes.subarray(2)).toString('base64url') };
}

/** Encodes an Ed25519 public key (raw 32 bytes) as a `did:key`; the inverse of {@link keyFromDidKey}. */
export function didKeyFromEd25519(publicKey: Uint8Array): string {
  return `did:key:z${base58.encode(Uint8Array.from([...ED25519_MULTICODEC, ...publicKey]))}`;
}

function requireString(value: unknown, name: string): string {
  if (typeof value !== 'string') throw new ProxyError('builtin-failed', `${name}: expected a string`);
  return value;
}

function decodeBase64url(value: unknown): Buffer | undefined {
  if (typeof value !== 'string' || !BASE64URL.test(value) || value.length % 4 === 1) return undefined;
  return Buffer.from(value, 'base64url');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** CEL map literals arrive as `Map`s; everything else is already plain. */
function toPlain(value: unknown): unknown {
  return value instanceof Map ? Object.fromEntries(value) : value;
}

/** base58btc (the multibase `z` alphabet); `undefined` for empty, overlong or non-base58 text. */
function decodeBase58(text: string): Uint8Array | undefined {
  if (text.length === 0 || text.length > DID_KEY_IDENTIFIER_LIMIT) return undefined;
  try {
    return base58.decode(text);
  } catch {
    // A character outside the alphabet: a malformed did:key, which the caller reports as null.
    return undefined;
  }
}
