import { randomUUID } from 'node:crypto';
import type { IIdentifier, IKey, ManagedKeyInfo } from '@veramo/core';
import { AbstractDIDStore } from '@veramo/did-manager';
import {
  AbstractKeyStore,
  AbstractPrivateKeyStore,
  type AbstractSecretBox,
  type ImportablePrivateKey,
  type ManagedPrivateKey,
} from '@veramo/key-manager';
import { IdentityError } from './identity-error';
import type { RecordStore } from './store';

/**
 * Veramo's three stores over identity's {@link RecordStore}, so keys and DIDs live in the
 * household's one database rather than Veramo's own. Private keys are sealed with the secret box
 * before they reach the store: the database never holds a private key in any encoding.
 */
export function veramoStores(records: RecordStore, secretBox: AbstractSecretBox) {
  return {
    keyStore: new RecordKeyStore(records),
    privateKeyStore: new SealedPrivateKeyStore(records, secretBox),
    didStore: new RecordDidStore(records),
  };
}

class RecordKeyStore extends AbstractKeyStore {
  constructor(private readonly records: RecordStore) {
    super();
  }

  async importKey(key: Partial<IKey>): Promise<boolean> {
    if (!key.kid) throw new IdentityError('store-failed', 'a key record needs a kid');
    // Public metadata only: a private key handed along is the private store's business.
    const { privateKeyHex: _never, ...publicPart } = key;
    await this.records.put('key', key.kid, JSON.stringify(publicPart));
    return true;
  }

  async getKey({ kid }: { kid: string }): Promise<IKey> {
    const value = await this.records.get('key', kid);
    if (value === undefined) throw new Error('not_found: key not found');
    return JSON.parse(value) as IKey;
  }

  async deleteKey({ kid }: { kid: string }): Promise<boolean> {
    return this.records.delete('key', kid);
  }

  async listKeys(): Promise<ManagedKeyInfo[]> {
    return (await this.records.list('key')).map((record) => JSON.parse(record.value) as ManagedKeyInfo);
  }
}

class SealedPrivateKeyStore extends AbstractPrivateKeyStore {
  constructor(
    private readonly records: RecordStore,
    private readonly secretBox: AbstractSecretBox,
  ) {
    super();
  }

  async importKey(key: ImportablePrivateKey): Promise<ManagedPrivateKey> {
    const alias = key.alias ?? randomUUID();
    const sealed = await this.secretBox.encrypt(key.privateKeyHex);
    await this.records.put('private-key', alias, JSON.stringify({ alias, type: key.type, sealed }));
    return { alias, type: key.type, privateKeyHex: key.privateKeyHex };
  }

  async getKey({ alias }: { alias: string }): Promise<ManagedPrivateKey> {
    const value = await this.records.get('private-key', alias);
    if (value === undefined) throw new Error('not_found: private key not found');
    return this.open(value);
  }

  async deleteKey({ alias }: { alias: string }): Promise<boolean> {
    return this.records.delete('private-key', alias);
  }

  async listKeys(): Promise<ManagedPrivateKey[]> {
    return Promise.all((await this.records.list('private-key')).map((record) => this.open(record.value)));
  }

  private async open(value: string): Promise<ManagedPrivateKey> {
    const record = JSON.parse(value) as { alias: string; type: ManagedPrivateKey['type']; sealed: string };
    // The secret box answers a wrong key with an empty string rather than an error: treat it as one.
    let privateKeyHex = '';
    try {
      privateKeyHex = await this.secretBox.decrypt(record.sealed);
    } catch (error) {
      throw new IdentityError('decrypt-failed', 'a household private key does not open with this key file', {
        cause: error,
      });
    }
    if (!/^[0-9a-f]{64,128}$/.test(privateKeyHex)) {
      throw new IdentityError('decrypt-failed', 'a household private key does not open with this key file');
    }
    return { alias: record.alias, type: record.type, privateKeyHex };
  }
}

class RecordDidStore extends AbstractDIDStore {
  constructor(private readonly records: RecordStore) {
    super();
  }

  async importDID(identifier: IIdentifier): Promise<boolean> {
    const keys = identifier.keys.map(({ privateKeyHex: _never, ...key }) => key);
    await this.records.put('did', identifier.did, JSON.stringify({ ...identifier, keys }));
    return true;
  }

  async getDID(query: { did: string } | { alias: string }): Promise<IIdentifier> {
    const found =
      'did' in query
        ? await this.records.get('did', query.did)
        : (await this.all()).find((identifier) => identifier.alias === query.alias);
    if (found === undefined) throw new Error('not_found: identifier not found');
    return typeof found === 'string' ? (JSON.parse(found) as IIdentifier) : found;
  }

  async deleteDID({ did }: { did: string }): Promise<boolean> {
    return this.records.delete('did', did);
  }

  async listDIDs(query: { alias?: string; provider?: string }): Promise<IIdentifier[]> {
    return (await this.all()).filter(
      (identifier) =>
        (query.alias === undefined || identifier.alias === query.alias) &&
        (query.provider === undefined || identifier.provider === query.provider),
    );
  }

  private async all(): Promise<IIdentifier[]> {
    return (await this.records.list('did')).map((record) => JSON.parse(record.value) as IIdentifier);
  }
}
