import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import type { MerchantKey } from './key-store.js';
import { ShopError } from './shop-error.js';

/** What to sign: the VC type after `VerifiableCredential`, its subject, and its lifetime. */
export type CredentialRequest = {
  type: 'Invoice' | 'FulfilmentCommitment' | 'AuditCheckpointWitnessed';
  subject: Record<string, unknown>;
  ttlSeconds: number;
  now: Date;
};

/** A signed JWT-VC and its `jti` (`urn:uuid:…`), which is the credential's single-use id. */
export type SignedCredential = { jws: string; jti: string; expiresAt: Date };

/**
 * Sign a JWT-VC as the merchant (EdDSA, `kid` = the did:key verification method), with
 * `iss` = merchant DID, a fresh `urn:uuid` `jti`, and `iat`/`nbf`/`exp`.
 */
export async function signCredential(key: MerchantKey, request: CredentialRequest): Promise<SignedCredential> {
  const jti = `urn:uuid:${randomUUID()}`;
  const iat = Math.floor(request.now.getTime() / 1000);
  const exp = iat + request.ttlSeconds;
  try {
    const jws = await new SignJWT({
      vc: {
        '@context': ['https://www.w3.org/2018/credentials/v1'],
        type: ['VerifiableCredential', request.type],
        credentialSubject: request.subject,
      },
    })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid: key.kid })
      .setIssuer(key.did)
      .setJti(jti)
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(exp)
      .sign(key.privateKey);
    return { jws, jti, expiresAt: new Date(exp * 1000) };
  } catch (error) {
    throw new ShopError('signing', `cannot sign the ${request.type} credential`, { cause: error });
  }
}
