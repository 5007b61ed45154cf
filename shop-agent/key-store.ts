import { chmodSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, importJWK } from 'jose';
import { z } from 'zod';
import { type DidKey, didKeyFromJwk } from './did-key.js';
import { ShopError } from './shop-error.js';

/** The merchant's signing identity: its did:key, the JWS `kid`, and the private key. */
export type MerchantKey = DidKey & { privateKey: CryptoKey };

/** File name of the merchant's private key inside the shop's data folder. */
export const KEY_FILE_NAME = 'merchant-key.json';

const PrivateJwk = z.object({
  kty: z.literal('OKP'),
  crv: z.literal('Ed25519'),
  x: z.string().min(43).max(43),
  d: z.string().min(43).max(43),
});

/**
 * Load the merchant key from `<dataDir>/merchant-key.json`, generating and persisting one
 * (mode 0600) on first start. Creation is create-if-absent (hard link of a temp file), so two
 * processes starting together end up with the same key rather than overwriting each other.
 */
export async function loadOrCreateMerchantKey(dataDir: string): Promise<MerchantKey> {
  const path = join(dataDir, KEY_FILE_NAME);
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const existing = readIfPresent(path);
    if (existing !== null) return await importMerchantKey(existing);

    const { privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
    const jwk = PrivateJwk.parse(await exportJWK(privateKey));
    const temp = `${path}.${process.pid}.${Date.now()}.tmp`;
    writeFileSync(temp, `${JSON.stringify(jwk)}\n`, { mode: 0o600, flag: 'wx' });
    try {
      linkSync(temp, path);
    } catch (error) {
      // Another process created the key first: use theirs.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      rmSync(temp, { force: true });
    }
    return await importMerchantKey(readFileSync(path, 'utf8'));
  } catch (error) {
    if (error instanceof ShopError) throw error;
    throw new ShopError('key-store', `cannot load or create the merchant key in ${dataDir}`, { cause: error });
  }
}

function readIfPresent(path: string): string | null {
  try {
    const text = readFileSync(path, 'utf8');
    // Tighten permissions if someone loosened them: the key is the shop's whole authority.
    chmodSync(path, 0o600);
    return text;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

async function importMerchantKey(text: string): Promise<MerchantKey> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ShopError('key-store', 'the merchant key file is not valid JSON', { cause: error });
  }
  const jwk = PrivateJwk.safeParse(parsed);
  if (!jwk.success) throw new ShopError('key-store', 'the merchant key file is not an Ed25519 private JWK');
  const privateKey = await importJWK({ ...jwk.data, alg: 'EdDSA' }, 'EdDSA');
  if (privateKey instanceof Uint8Array) throw new ShopError('key-store', 'the merchant key is not an asymmetric key');
  return { ...didKeyFromJwk(jwk.data), privateKey };
}
