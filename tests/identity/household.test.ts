import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type CredentialVerifier,
  createCredentialVerifier,
  createVeramoVerifier,
  householdKeys,
  keyFileName,
  openHousehold,
  roles,
} from '../../identity/index';
import { openSqliteHouseholdStore } from '../../lib/store';

const folders: string[] = [];
afterEach(async () => {
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

async function dataFolder(): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), 'emcp-household-'));
  folders.push(folder);
  return folder;
}

async function open(dataDir: string) {
  const store = openSqliteHouseholdStore({ path: join(dataDir, 'household.sqlite') });
  const household = await openHousehold({ store: store.identity, dataDir });
  return { store, household };
}

describe('household setup', () => {
  it('creates the admin did:web, member and settlement did:keys and memberships that both verifiers accept', async () => {
    const dataDir = await dataFolder();
    const { store, household } = await open(dataDir);
    expect(household.adminDid).toBe('did:web:localhost%3A3000');
    expect(household.adminDocument.id).toBe(household.adminDid);
    expect(household.members.child).toMatch(/^did:key:z6Mk/);
    expect(household.members.parent).toMatch(/^did:key:z6Mk/);
    expect(household.settlementDid).toMatch(/^did:key:z6Mk/);
    expect(new Set([household.members.child, household.members.parent, household.settlementDid]).size).toBe(3);

    const verifiers: CredentialVerifier[] = [
      createCredentialVerifier(householdKeys(household)),
      createVeramoVerifier({ adminDocument: household.adminDocument }),
    ];
    for (const verify of verifiers) {
      for (const role of roles) {
        const verdict = await verify(household.memberships[role], {
          type: 'FamilyMembership',
          issuer: household.adminDid,
          now: new Date(),
        });
        expect(verdict).toMatchObject({
          verified: true,
          credential: { sub: household.members[role], subject: { role, household: household.adminDid } },
        });
      }
    }
    store.close();
  });

  it('is idempotent: a second start changes no key, DID or credential', async () => {
    const dataDir = await dataFolder();
    const first = await open(dataDir);
    const before = {
      household: JSON.stringify({ ...first.household, store: undefined, issue: undefined }),
      keys: await first.store.identity.records.list('key'),
      sealed: await first.store.identity.records.list('private-key'),
      dids: await first.store.identity.records.list('did'),
      keyFile: await readFile(join(dataDir, keyFileName), 'utf8'),
    };
    first.store.close();

    const second = await open(dataDir);
    expect(JSON.stringify({ ...second.household, store: undefined, issue: undefined })).toBe(before.household);
    expect(await second.store.identity.records.list('key')).toEqual(before.keys);
    expect(await second.store.identity.records.list('private-key')).toEqual(before.sealed);
    expect(await second.store.identity.records.list('did')).toEqual(before.dids);
    expect(await readFile(join(dataDir, keyFileName), 'utf8')).toBe(before.keyFile);
    // And it can still sign with the keys it sealed.
    const approval = await second.household.issue({
      signer: 'child',
      type: 'FamilyMembership',
      subject: second.household.members.child,
      claims: { role: 'child', household: second.household.adminDid },
      now: new Date(),
    });
    const verdict = await createCredentialVerifier(householdKeys(second.household))(approval, {
      type: 'FamilyMembership',
      issuer: second.household.members.child,
      now: new Date(),
    });
    expect(verdict.verified).toBe(true);
    second.store.close();
  });

  it('keeps private keys sealed: no file in the data folder holds one in any encoding, and the key file is 0600', async () => {
    const dataDir = await dataFolder();
    const { store, household } = await open(dataDir);
    // Sign something so every key has been opened at least once.
    for (const role of roles) {
      await household.issue({
        signer: role,
        type: 'FamilyMembership',
        subject: household.members[role],
        claims: { role, household: household.adminDid },
        now: new Date(),
      });
    }
    store.close();
    expect((await stat(join(dataDir, keyFileName))).mode & 0o777).toBe(0o600);

    // The private keys, recovered through Veramo's own key store with the key file present.
    const reopened = openSqliteHouseholdStore({ path: join(dataDir, 'household.sqlite') });
    const { KeyManagementSystem, SecretBox } = await import('@veramo/kms-local');
    const { veramoStores } = await import('../../identity/veramo-stores');
    const secret = (await readFile(join(dataDir, keyFileName), 'utf8')).trim();
    const { privateKeyStore } = veramoStores(reopened.identity.records, new SecretBox(secret));
    const privateKeys = await privateKeyStore.listKeys();
    expect(privateKeys).toHaveLength(4);
    expect(KeyManagementSystem).toBeDefined();
    reopened.close();

    const needles = privateKeys.flatMap(({ privateKeyHex }) => {
      const seed = Buffer.from(privateKeyHex, 'hex').subarray(0, 32);
      return [
        seed,
        Buffer.from(seed.toString('hex')),
        Buffer.from(seed.toString('hex').toUpperCase()),
        Buffer.from(seed.toString('base64')),
        Buffer.from(seed.toString('base64url')),
        Buffer.from(seed.toString('base64').slice(0, 40)),
        Buffer.from(seed.toString('base64url').slice(0, 40)),
      ];
    });
    const files = (await readdir(dataDir)).filter((name) => name !== keyFileName);
    expect(files.length).toBeGreaterThan(0);
    for (const name of files) {
      const bytes = await readFile(join(dataDir, name));
      for (const needle of needles) expect(bytes.includes(needle), `${name} holds a private key`).toBe(false);
    }
  });

  it('refuses to open without the key file, or with another key file', async () => {
    const dataDir = await dataFolder();
    (await open(dataDir)).store.close();
    const keyFile = join(dataDir, keyFileName);
    const original = await readFile(keyFile, 'utf8');

    await rm(keyFile);
    await expect(open(dataDir)).rejects.toMatchObject({ code: 'key-file' });
    // Refusing did not create a new key file that would seal new keys.
    await expect(stat(keyFile)).rejects.toThrow();

    await writeFile(keyFile, `${'ab'.repeat(32)}\n`, { mode: 0o600 });
    await expect(open(dataDir)).rejects.toMatchObject({ code: 'decrypt-failed' });

    await writeFile(keyFile, original, { mode: 0o600 });
    const { store } = await open(dataDir);
    store.close();
  });

  it('refuses a data folder set up for another household DID', async () => {
    const dataDir = await dataFolder();
    (await open(dataDir)).store.close();
    const store = openSqliteHouseholdStore({ path: join(dataDir, 'household.sqlite') });
    await expect(
      openHousehold({ store: store.identity, dataDir, adminDid: 'did:web:shop.example' }),
    ).rejects.toMatchObject({ code: 'household-invalid' });
    store.close();
  });
});
