import type { DidKey } from './did-key.js';

/** A minimal W3C DID document with one JsonWebKey2020 verification method. */
export type DidDocument = {
  '@context': string[];
  id: string;
  verificationMethod: { id: string; type: 'JsonWebKey2020'; controller: string; publicKeyJwk: DidKey['publicJwk'] }[];
  authentication: string[];
  assertionMethod: string[];
};

/**
 * The merchant's DID document: the key that signs invoices and commitments, listed as a
 * JsonWebKey2020 verification method whose id is the JWS `kid`.
 */
export function didDocument(key: DidKey): DidDocument {
  return {
    '@context': ['https://www.w3.org/ns/did/v1', 'https://w3id.org/security/suites/jws-2020/v1'],
    id: key.did,
    verificationMethod: [{ id: key.kid, type: 'JsonWebKey2020', controller: key.did, publicKeyJwk: key.publicJwk }],
    authentication: [key.kid],
    assertionMethod: [key.kid],
  };
}
