import { createHash, createPublicKey, verify } from 'node:crypto';
import { verifyAuthenticationResponse } from '@simplewebauthn/server';
import { isoCBOR } from '@simplewebauthn/server/helpers';
import type { PasskeyAssertion } from './credentials';
import { framingRefusal } from './framing-refusal';
import { decodeSegment } from './safe-json';

/** What a passkey assertion must prove, from the operator's configuration and the evidence. */
export interface AssertionExpectation {
  /** base64url of the 32 challenge bytes: the invoice hash. */
  readonly challenge: string;
  readonly origin: string;
  readonly rpId: string;
  /** The passkey's P-256 public JWK, from its `PasskeyEnrollment`. */
  readonly publicKeyJwk: Readonly<Record<string, string>>;
}

/** The verdict on a passkey assertion. */
export type AssertionVerdict = { readonly verified: true } | { readonly verified: false; readonly reason: string };

/** Verifies a WebAuthn assertion carried as evidence; the hot path and SimpleWebAuthn both have this shape. */
export type AssertionVerifier = (
  assertion: PasskeyAssertion,
  expected: AssertionExpectation,
) => Promise<AssertionVerdict>;

const FLAG_USER_PRESENT = 0x01;
const FLAG_USER_VERIFIED = 0x04;

/**
 * The hot-path assertion check with `node:crypto`, in the order of WebAuthn §7.2 (the steps that
 * apply to evidence verified after the ceremony: the sign counter is the ceremony's to check).
 */
export const verifyAssertionFast: AssertionVerifier = async (assertion, expected) => {
  const refuse = (reason: string) => ({ verified: false, reason: `the passkey assertion ${reason}` }) as const;
  const authData = Buffer.from(assertion.authenticatorData, 'base64url');
  const clientDataBytes = Buffer.from(assertion.clientDataJSON, 'base64url');
  // §7.2 steps 11–14: clientDataJSON is a JSON object of type webauthn.get.
  const clientData = decodeSegment(assertion.clientDataJSON);
  if (clientData?.type !== 'webauthn.get') return refuse('is not a webauthn.get assertion');
  // Step 15: the challenge is the invoice hash.
  if (clientData.challenge !== expected.challenge) return refuse('was made over another challenge');
  // Step 16: the origin is the household's, and not from an embedding frame.
  if (clientData.origin !== expected.origin) return refuse(`comes from ${String(clientData.origin)}`);
  if (framingRefusal(clientData) !== undefined) return refuse('comes from a cross-origin frame');
  // Step 19: rpIdHash is SHA-256 of the configured rpId.
  if (authData.length < 37) return refuse('has truncated authenticator data');
  if (!authData.subarray(0, 32).equals(createHash('sha256').update(expected.rpId, 'utf8').digest())) {
    return refuse('is for another relying party');
  }
  // Steps 20–21: user present and user verified.
  const flags = authData[32] ?? 0;
  if ((flags & FLAG_USER_PRESENT) === 0) return refuse('has no user presence');
  if ((flags & FLAG_USER_VERIFIED) === 0) return refuse('has no user verification');
  // Steps 23–24: ES256 over authenticatorData || SHA-256(clientDataJSON), with the enrolled key.
  try {
    const key = createPublicKey({ key: { ...expected.publicKeyJwk }, format: 'jwk' });
    const signed = Buffer.concat([authData, createHash('sha256').update(clientDataBytes).digest()]);
    const signature = Buffer.from(assertion.signature, 'base64url');
    if (!verify('sha256', signed, { key, dsaEncoding: 'der' }, signature)) return refuse('signature does not verify');
  } catch {
    return refuse('signature does not verify with the enrolled key');
  }
  return { verified: true };
};

/**
 * The independent check with `@simplewebauthn/server`: the enrolled JWK as a COSE key, the whole
 * response verified by the library (counter 0: the ceremony, not the evidence, owns counters).
 */
export const verifyAssertionWithSimpleWebAuthn: AssertionVerifier = async (assertion, expected) => {
  const clientData = decodeSegment(assertion.clientDataJSON);
  // The library accepts a topOrigin the household never expects: refuse it here as the fast path does.
  if (!clientData || framingRefusal(clientData) !== undefined) {
    return { verified: false, reason: 'the passkey assertion comes from a cross-origin frame' };
  }
  try {
    const result = await verifyAuthenticationResponse({
      response: {
        id: assertion.credentialId,
        rawId: assertion.credentialId,
        type: 'public-key',
        clientExtensionResults: {},
        response: {
          authenticatorData: assertion.authenticatorData,
          clientDataJSON: assertion.clientDataJSON,
          signature: assertion.signature,
        },
      },
      expectedChallenge: expected.challenge,
      expectedOrigin: expected.origin,
      expectedRPID: expected.rpId,
      requireUserVerification: true,
      credential: { id: assertion.credentialId, publicKey: coseKeyOf(expected.publicKeyJwk), counter: 0 },
    });
    return result.verified ? { verified: true } : { verified: false, reason: 'the passkey assertion does not verify' };
  } catch (error) {
    return { verified: false, reason: `the passkey assertion does not verify: ${(error as Error).message}` };
  }
};

/** A P-256 JWK as a COSE_Key (RFC 9053: kty EC2, alg ES256, crv P-256, x, y). */
export function coseKeyOf(jwk: Readonly<Record<string, string>>): Uint8Array<ArrayBuffer> {
  const map = new Map<number, number | Uint8Array>([
    [1, 2],
    [3, -7],
    [-1, 1],
    [-2, Uint8Array.from(Buffer.from(jwk.x ?? '', 'base64url'))],
    [-3, Uint8Array.from(Buffer.from(jwk.y ?? '', 'base64url'))],
  ]);
  return Uint8Array.from(isoCBOR.encode(map));
}
