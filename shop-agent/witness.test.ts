import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compactVerify, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { jwkFromDidKey } from './did-key.js';
import { loadOrCreateMerchantKey } from './key-store.js';
import { type CheckpointWitness, openCheckpointWitness } from './witness.js';

const folders: string[] = [];
const opened: CheckpointWitness[] = [];
afterEach(() => {
  for (const witness of opened.splice(0)) witness.close();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

async function setup(limits: { perHousehold?: number; households?: number } = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'shop-witness-'));
  folders.push(dataDir);
  const key = await loadOrCreateMerchantKey(dataDir);
  const witness = openCheckpointWitness({ path: join(dataDir, 'witness.sqlite'), key, limits });
  opened.push(witness);
  return { witness, key };
}

/** A household admin: signs AuditCheckpoint JWT-VCs the way the household's identity does (EdDSA, iss = sub = its DID). */
async function admin(did: string) {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const { kty, crv, x } = await exportJWK(publicKey);
  const adminJwk = { kty: kty as 'OKP', crv: crv as 'Ed25519', x: String(x) };
  const checkpoint = async (rowId: number, hash = rowId.toString(16).padStart(64, '0')) => {
    const iat = Math.floor(Date.now() / 1000);
    const credential = await new SignJWT({
      vc: { type: ['VerifiableCredential', 'AuditCheckpoint'], credentialSubject: { rowId, hash } },
    })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT' })
      .setIssuer(did)
      .setSubject(did)
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(iat + 3600)
      .sign(privateKey);
    return { checkpoint: { householdDid: did, rowId, hash, credential }, adminJwk };
  };
  return { checkpoint, adminJwk };
}

describe('the shop as a checkpoint witness', () => {
  it('verifies the admin signature, countersigns with the merchant key, and returns the latest', async () => {
    const { witness, key } = await setup();
    const household = await admin('did:web:home.example');
    const submitted = await witness.submit(await household.checkpoint(10));
    expect(submitted.ok).toBe(true);
    if (!submitted.ok) return;
    const merchantJwk = jwkFromDidKey(key.did);
    if (merchantJwk === null) throw new Error('no merchant key');
    const countersigned = await compactVerify(submitted.value.countersignature, merchantJwk);
    expect(JSON.parse(new TextDecoder().decode(countersigned.payload)).vc.credentialSubject).toMatchObject({
      householdDid: 'did:web:home.example',
      rowId: 10,
    });
    expect(witness.latest('did:web:home.example')).toMatchObject({ ok: true, value: { checkpoint: { rowId: 10 } } });
    expect(witness.latest('did:web:elsewhere.example')).toEqual({ ok: true, value: { checkpoint: null } });
  });

  it('never moves backwards: an older row or another hash for a held row is refused; the same one is idempotent', async () => {
    const { witness } = await setup();
    const household = await admin('did:web:home.example');
    expect((await witness.submit(await household.checkpoint(20))).ok).toBe(true);
    const older = await witness.submit(await household.checkpoint(12));
    expect(older).toMatchObject({ ok: false, reason: expect.stringContaining('goes backwards') });
    const fork = await witness.submit(await household.checkpoint(20, 'f'.repeat(64)));
    expect(fork).toMatchObject({ ok: false, reason: expect.stringContaining('another hash for row 20') });
    expect((await witness.submit(await household.checkpoint(20))).ok).toBe(true);
    expect(witness.latest('did:web:home.example')).toMatchObject({ value: { checkpoint: { rowId: 20 } } });
  });

  it('pins the admin key per household on first contact and refuses checkpoints under another key', async () => {
    const { witness } = await setup();
    const real = await admin('did:web:home.example');
    const impostor = await admin('did:web:home.example');
    expect((await witness.submit(await real.checkpoint(5))).ok).toBe(true);
    expect(await witness.submit(await impostor.checkpoint(50))).toMatchObject({
      ok: false,
      reason: 'the witness pinned another admin key for did:web:home.example',
    });
    // Another key's signature under the pinned key's name is refused too.
    const forged = await impostor.checkpoint(60);
    expect(await witness.submit({ ...forged, adminJwk: real.adminJwk })).toMatchObject({
      ok: false,
      reason: 'the checkpoint is not signed by the admin key of did:web:home.example',
    });
  });

  it('bounds storage: the newest few checkpoints per household, and a cap on households', async () => {
    const { witness } = await setup({ perHousehold: 3, households: 1 });
    const household = await admin('did:web:home.example');
    for (const rowId of [1, 2, 3, 4, 5, 6])
      expect((await witness.submit(await household.checkpoint(rowId))).ok).toBe(true);
    expect(witness.count('did:web:home.example')).toBe(3);
    expect(witness.latest('did:web:home.example')).toMatchObject({ value: { checkpoint: { rowId: 6 } } });
    const other = await admin('did:web:other.example');
    expect(await witness.submit(await other.checkpoint(1))).toMatchObject({
      ok: false,
      reason: 'the witness already serves 1 households and takes no more',
    });
  });
});
