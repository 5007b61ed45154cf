import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { KEY_FILE_NAME, loadOrCreateMerchantKey } from './key-store.js';
import { ShopError } from './shop-error.js';

const folders: string[] = [];
const tempFolder = () => {
  const folder = mkdtempSync(join(tmpdir(), 'shop-key-'));
  folders.push(folder);
  return folder;
};
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe('loadOrCreateMerchantKey', () => {
  it('creates a 0600 key file on first start and loads the same DID after', async () => {
    const dataDir = join(tempFolder(), 'nested', 'shop');
    const first = await loadOrCreateMerchantKey(dataDir);
    const path = join(dataDir, KEY_FILE_NAME);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toMatchObject({ kty: 'OKP', crv: 'Ed25519', x: first.publicJwk.x });
    const second = await loadOrCreateMerchantKey(dataDir);
    expect(second.did).toBe(first.did);
    expect(second.kid).toBe(`${first.did}#${first.did.slice('did:key:'.length)}`);
  });

  it('gives concurrent first starts the same key', async () => {
    const dataDir = tempFolder();
    const keys = await Promise.all([1, 2, 3, 4].map(() => loadOrCreateMerchantKey(dataDir)));
    expect(new Set(keys.map((key) => key.did)).size).toBe(1);
  });

  it('refuses a corrupt key file instead of replacing it', async () => {
    const dataDir = tempFolder();
    writeFileSync(join(dataDir, KEY_FILE_NAME), '{"kty":"OKP"}', { mode: 0o600 });
    await expect(loadOrCreateMerchantKey(dataDir)).rejects.toBeInstanceOf(ShopError);
    expect(readFileSync(join(dataDir, KEY_FILE_NAME), 'utf8')).toBe('{"kty":"OKP"}');
  });
});
