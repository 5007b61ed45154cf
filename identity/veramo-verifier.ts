import { createAgent, type ICredentialVerifier, type IResolver } from '@veramo/core';
import { CredentialProviderJWT } from '@veramo/credential-jwt';
import { CredentialPlugin } from '@veramo/credential-w3c';
import { getDidKeyResolver } from '@veramo/did-provider-key';
import { DIDResolverPlugin } from '@veramo/did-resolver';
import { type DIDResolutionResult, Resolver } from 'did-resolver';
import type { DidDocument } from './household';
import { decodeSegment } from './safe-json';
import { type CredentialVerifier, readClaims } from './verify-credential';

/**
 * The independent second verifier (SPEC §5.2): Veramo resolves the issuer's DID and checks the JWS
 * with did-jwt, then the same claim rules as the hot path apply. The admin's `did:web` resolves only
 * from the pinned document, never over the network; every other `did:web` is unresolvable.
 */
export function createVeramoVerifier(options: { readonly adminDocument: DidDocument }): CredentialVerifier {
  const pinned: DIDResolutionResult = {
    didDocument: structuredClone(options.adminDocument) as DIDResolutionResult['didDocument'],
    didDocumentMetadata: {},
    didResolutionMetadata: { contentType: 'application/did+ld+json' },
  };
  const agent = createAgent<IResolver & ICredentialVerifier>({
    plugins: [
      new DIDResolverPlugin({
        resolver: new Resolver({
          ...getDidKeyResolver(),
          web: async (did) =>
            did === options.adminDocument.id
              ? pinned
              : { didDocument: null, didDocumentMetadata: {}, didResolutionMetadata: { error: 'notFound' } },
        }),
      }),
      new CredentialPlugin([new CredentialProviderJWT()]),
    ],
  });

  return async (jws, expected) => {
    const refuse = (reason: string) =>
      ({ verified: false, reason: `the ${expected.type} is not acceptable: ${reason}` }) as const;
    // 1. RFC 7515 §4.1.11: a `crit` extension the verifier does not understand must be refused.
    //    did-jwt ignores `crit`, so the wrapper checks the header itself.
    const header = decodeSegment(jws.split('.')[0] ?? '');
    if (!header || 'crit' in header) return refuse('its header is not a plain JWS header');
    // 2. Veramo: resolve the issuer (pinned or did:key), verify the signature, and exp/nbf at `now`.
    try {
      const result = await agent.verifyCredential({
        credential: jws,
        policies: { now: Math.floor(expected.now.getTime() / 1000) },
      });
      if (!result.verified) return refuse(result.error?.message ?? 'Veramo did not verify it');
    } catch (error) {
      return refuse(error instanceof Error ? error.message : 'Veramo could not verify it');
    }
    // 3. The same claim layout and bounds as the hot path, read from the bytes Veramo verified.
    return readClaims(decodeSegment(jws.split('.')[1] ?? ''), expected);
  };
}
