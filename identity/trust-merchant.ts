import { keyFromDidKey } from '../proxy/index';
import { IdentityError } from './identity-error';
import type { MerchantRecord, MerchantStore } from './store';

/** What the operator pins: the merchant's `did:key` (its key is in the DID) and a display name. */
export interface TrustMerchantRequest {
  readonly did: string;
  readonly name: string;
  /** When given (from the merchant's DID document), it must be the key the DID encodes. */
  readonly publicKeyJwk?: Readonly<Record<string, string>>;
  readonly now: Date;
}

/**
 * Pins a merchant as trusted (SPEC §6, §8): an operator action (CLI, runtime setup), never a tool.
 * Pinning the same DID and key again is a no-op; a different key for a pinned DID is refused with a
 * clear message rather than overwritten.
 */
export async function trustMerchant(merchants: MerchantStore, request: TrustMerchantRequest): Promise<MerchantRecord> {
  const jwk = keyFromDidKey(request.did);
  if (jwk === null) throw new IdentityError('bad-request', `"${request.did}" is not an Ed25519 did:key`);
  const publicKeyJwk = { kty: jwk.kty, crv: jwk.crv, x: jwk.x };
  if (request.publicKeyJwk !== undefined && request.publicKeyJwk.x !== jwk.x) {
    throw new IdentityError('merchant-conflict', `the key offered for ${request.did} is not the key its DID encodes`);
  }
  const record: MerchantRecord = {
    did: request.did,
    name: request.name,
    publicKeyJwk,
    trustedAt: request.now.getTime(),
  };
  if (await merchants.add(record)) return record;
  const pinned = await merchants.get(request.did);
  if (pinned?.publicKeyJwk.x !== jwk.x) {
    throw new IdentityError(
      'merchant-conflict',
      `${request.did} is already pinned with another key; refusing to replace it`,
    );
  }
  return pinned;
}
