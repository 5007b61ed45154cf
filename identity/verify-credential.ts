import { createPublicKey, type KeyObject, verify } from 'node:crypto';
import { keyFromDidKey } from '../proxy/index';
import { type CredentialType, clockSkewSeconds, lifetimeSeconds } from './credentials';
import { decodeSegment, isRecord } from './safe-json';

/** A JWT-VC's claims, read only from verified bytes, in the one layout of SPEC §5.2. */
export interface VerifiedCredential {
  readonly iss: string;
  /** The subject DID; present for credentials about a party (membership, enrollment, approval). */
  readonly sub?: string;
  readonly jti: string;
  readonly iat: number;
  readonly nbf: number;
  readonly exp: number;
  readonly type: CredentialType;
  /** `vc.credentialSubject` (its `id` lives in `sub`). */
  readonly subject: Readonly<Record<string, unknown>>;
}

/** The verdict on one credential. */
export type CredentialVerdict =
  | { readonly verified: true; readonly credential: VerifiedCredential }
  | { readonly verified: false; readonly reason: string };

/** What a credential must be to be accepted. */
export interface CredentialExpectation {
  readonly type: CredentialType;
  /** The DID that must have issued it; any DID whose key the verifier can resolve when absent. */
  readonly issuer?: string;
  readonly now: Date;
}

/** The keys the household trusts: the pinned admin key; `did:key` DIDs carry their own. */
export interface TrustAnchors {
  readonly adminDid: string;
  readonly adminJwk: Readonly<Record<string, string>>;
}

/** Finds the public JWK a verifier trusts for a DID, or `undefined` when it trusts none. */
export type KeyResolver = (did: string) => Readonly<Record<string, string>> | undefined;

/** Credential types whose `sub` names a party and is therefore required. */
const subjectRequired: ReadonlySet<CredentialType> = new Set([
  'FamilyMembership',
  'PasskeyEnrollment',
  'OrderApproval',
  'CallApproval',
  'Allowance',
  'AuditCheckpoint',
]);

/** The household's keys: the admin's `did:web` only from the pinned key, any `did:key` from itself. */
export function householdKeys(anchors: TrustAnchors): KeyResolver {
  return (did) => {
    if (did === anchors.adminDid) return anchors.adminJwk;
    const jwk = keyFromDidKey(did);
    return jwk === null ? undefined : { ...jwk };
  };
}

/** Verifies JWT-VCs; the hot path and the Veramo verifier both have this shape. */
export type CredentialVerifier = (jws: string, expected: CredentialExpectation) => Promise<CredentialVerdict>;

const KEY_CACHE_LIMIT = 256;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/**
 * The hot-path verifier: compact JWS with `node:crypto` Ed25519 and pre-parsed, cached keys (a gated
 * decision must stay in the low milliseconds). Issuers resolve only through `resolveKey`: anything it
 * does not know is untrusted.
 */
export function createCredentialVerifier(resolveKey: KeyResolver): CredentialVerifier {
  const keys = new Map<string, KeyObject>();
  const keyOf = (did: string): KeyObject | undefined => {
    const cached = keys.get(did);
    if (cached) return cached;
    const jwk = resolveKey(did);
    if (!jwk) return undefined;
    const key = createPublicKey({ key: { ...jwk }, format: 'jwk' });
    if (keys.size >= KEY_CACHE_LIMIT) keys.clear();
    keys.set(did, key);
    return key;
  };

  return async (jws, expected) => {
    // 1. Compact JWS: three base64url segments.
    const parts = typeof jws === 'string' ? jws.split('.') : [];
    if (parts.length !== 3 || !parts.every((part) => BASE64URL.test(part))) {
      return refuse(expected, 'it is not a compact JWS');
    }
    const [header, body, signature] = parts as [string, string, string];
    // 2. Protected header: EdDSA (or the fully specified Ed25519), no `crit` extensions to honour.
    const headerJson = decodeSegment(header);
    if (!headerJson || (headerJson.alg !== 'EdDSA' && headerJson.alg !== 'Ed25519') || 'crit' in headerJson) {
      return refuse(expected, 'it is not signed with EdDSA');
    }
    // 3. The issuer named in the payload must be the expected one, and its key one the household trusts.
    //    The payload is read for `iss` only to find the key; no claim is used before the signature verifies.
    const unverified = decodeSegment(body);
    const iss = unverified?.iss;
    if (typeof iss !== 'string') return refuse(expected, 'it names no issuer');
    if (expected.issuer !== undefined && iss !== expected.issuer) {
      return refuse(expected, `it is issued by ${iss}, not by ${expected.issuer}`);
    }
    const key = keyOf(iss);
    if (!key) return refuse(expected, `its issuer ${iss} is not one the household can verify`);
    // 4. Ed25519 signature (64 bytes) over the ASCII signing input.
    const signatureBytes = Buffer.from(signature, 'base64url');
    if (signatureBytes.length !== 64 || !verify(null, Buffer.from(`${header}.${body}`, 'ascii'), key, signatureBytes)) {
      return refuse(expected, 'its signature does not verify');
    }
    // 5. Claims, from the verified bytes.
    return readClaims(unverified, expected);
  };
}

/**
 * Reads and bounds the claims of a verified payload (SPEC §5.2), for both verifiers: `iss`, `sub`,
 * `jti` (`urn:uuid:`), `iat`/`nbf`/`exp` present, `iat`/`nbf` not in the future beyond the skew, not
 * expired, a lifetime no longer than the type's, and `vc.type` naming the expected type.
 */
export function readClaims(payload: unknown, expected: CredentialExpectation): CredentialVerdict {
  if (!isRecord(payload)) return refuse(expected, 'its payload is not a JSON object');
  const { iss, sub, jti, iat, nbf, exp, vc } = payload;
  // 1. Identifiers.
  if (typeof iss !== 'string' || (expected.issuer !== undefined && iss !== expected.issuer)) {
    return refuse(expected, 'its issuer is not the expected one');
  }
  if (sub !== undefined && (typeof sub !== 'string' || sub.length === 0))
    return refuse(expected, 'its sub is not a DID');
  if (sub === undefined && subjectRequired.has(expected.type)) return refuse(expected, 'it has no subject (sub)');
  if (typeof jti !== 'string' || !/^urn:uuid:[0-9a-f-]{36}$/i.test(jti)) {
    return refuse(expected, 'it has no urn:uuid id (jti)');
  }
  // 2. Time claims: present, not from the future, not expired, no longer-lived than the type allows.
  if (!isSeconds(exp)) return refuse(expected, 'it has no valid exp (expiry)');
  if (!isSeconds(iat)) return refuse(expected, 'it has no valid iat (issued-at)');
  if (!isSeconds(nbf)) return refuse(expected, 'it has no valid nbf (not-before)');
  const now = Math.floor(expected.now.getTime() / 1000);
  if (iat > now + clockSkewSeconds) return refuse(expected, 'it was issued in the future (iat)');
  if (nbf > now + clockSkewSeconds) return refuse(expected, 'it is not valid yet (nbf)');
  if (now >= exp) return refuse(expected, 'it has expired');
  if (exp <= iat || exp - iat > lifetimeSeconds[expected.type]) {
    return refuse(expected, `its lifetime is longer than a ${expected.type} may have`);
  }
  // 3. The type and subject.
  if (!isRecord(vc) || !Array.isArray(vc.type) || !vc.type.includes(expected.type)) {
    return refuse(expected, `it is not a ${expected.type} credential`);
  }
  if (!isRecord(vc.credentialSubject)) return refuse(expected, 'it has no credentialSubject');
  return {
    verified: true,
    credential: {
      iss,
      ...(sub === undefined ? {} : { sub }),
      jti,
      iat,
      nbf,
      exp,
      type: expected.type,
      subject: vc.credentialSubject,
    },
  };
}

function refuse(expected: CredentialExpectation, reason: string): CredentialVerdict {
  return { verified: false, reason: `the ${expected.type} is not acceptable: ${reason}` };
}

function isSeconds(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value < 1e11;
}
