import type { PasskeyAssertion } from '../../identity/index';
import type { SoftwareAuthenticator } from './software-authenticator';
import { rpId } from './support';

/**
 * What the approval window's browser sends for a call: a real assertion from the member's
 * software authenticator whose challenge is the call hash (the 32 digest bytes, base64url).
 */
export function assertCall(
  authenticator: SoftwareAuthenticator,
  callHash: string,
  overrides: Parameters<SoftwareAuthenticator['assert']>[1] = {},
): PasskeyAssertion {
  const credential = authenticator.credentials[0];
  if (credential === undefined) throw new Error('the authenticator holds no credential');
  const response = authenticator.assert(
    { challenge: callHash, rpId, allowCredentials: [{ id: credential.id, type: 'public-key' }] },
    overrides,
  );
  return {
    credentialId: response.id,
    authenticatorData: response.response.authenticatorData,
    clientDataJSON: response.response.clientDataJSON,
    signature: response.response.signature,
  };
}
