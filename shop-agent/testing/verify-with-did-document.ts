import { type JWTPayload, jwtVerify } from 'jose';
import type { DidDocument } from '../did-document.js';

/**
 * Test support: verify a merchant JWT-VC the way a relying party would, with the key the DID
 * document lists under the JWS header's `kid`, and the issuer equal to the document's DID.
 */
export async function verifyWithDidDocument(jws: string, document: DidDocument): Promise<JWTPayload> {
  const { payload } = await jwtVerify(
    jws,
    async (header) => {
      const method = document.verificationMethod.find((candidate) => candidate.id === header.kid);
      if (method === undefined) throw new Error(`kid ${header.kid} is not in the DID document`);
      return method.publicKeyJwk;
    },
    { algorithms: ['EdDSA'], issuer: document.id },
  );
  return payload;
}
