import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../../tests/support/postgres';
import { describeStore, openProxyStores, type ProxyStores, parseStoreUrl } from './store-url';

const opened: ProxyStores[] = [];
afterEach(async () => {
  await Promise.allSettled(opened.splice(0).map((stores) => stores.close()));
});

describe('parseStoreUrl', () => {
  it('defaults to proxy.sqlite beside the config, and reads sqlite:, postgres:// and memory:', () => {
    expect(parseStoreUrl(undefined, '/etc/emcp/config.json')).toEqual({
      kind: 'sqlite',
      path: resolve('/etc/emcp/proxy.sqlite'),
    });
    expect(parseStoreUrl('sqlite:state.sqlite', 'config.json')).toEqual({
      kind: 'sqlite',
      path: resolve('state.sqlite'),
    });
    expect(parseStoreUrl('memory:', 'config.json')).toEqual({ kind: 'memory' });
    for (const url of ['postgres://proxy:secret@db.internal:5432/emcp', 'postgresql://db.internal/emcp']) {
      expect(parseStoreUrl(url, 'config.json')).toEqual({ kind: 'postgres', url });
    }
  });

  it('refuses other schemes, and never echoes a PostgreSQL URL that does not parse', () => {
    expect(() => parseStoreUrl('mysql://db/emcp', 'config.json')).toThrow(/use sqlite:FILE, postgres:\/\/… or memory:/);
    expect(() => parseStoreUrl('sqlite:', 'config.json')).toThrow(/is not a store URL/);
    let message = '';
    try {
      parseStoreUrl('postgres://proxy:hunter2@[bad/emcp', 'config.json');
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/does not parse/);
    expect(message).not.toContain('hunter2');
  });
});

describe('describeStore', () => {
  it('names a PostgreSQL database and host without the user or password', () => {
    const described = describeStore({
      kind: 'postgres',
      url: 'postgres://proxy:hunter2@db.internal:5433/emcp?sslmode=require',
    });
    expect(described).toBe('postgres: database emcp on db.internal:5433');
    expect(describeStore({ kind: 'postgres', url: 'postgres://proxy@localhost/emcp?host=%2Frun%2Fpg' })).toBe(
      'postgres: database emcp on /run/pg',
    );
  });
});

describe('openProxyStores', () => {
  it('refuses PostgreSQL without a state key file, before connecting', async () => {
    await expect(openProxyStores({ kind: 'postgres', url: 'postgres://nobody@127.0.0.1:1/none' })).rejects.toThrow(
      /needs --state-key FILE/,
    );
  });

  it('refuses a request-state key that others may read, and opens nothing', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'emcp-store-url-'));
    const keyPath = join(folder, 'proxy.sqlite.key');
    writeFileSync(keyPath, randomBytes(32), { mode: 0o644 });
    chmodSync(keyPath, 0o644);
    await expect(openProxyStores({ kind: 'sqlite', path: join(folder, 'proxy.sqlite') })).rejects.toThrow(
      /proxy\.sqlite\.key is readable by others \(mode 0644\); make it the owner's only: chmod 600/,
    );
    expect(readdirSync(folder)).toStrictEqual(['proxy.sqlite.key']);
  });

  it('refuses a state key with a memory store, which has no replicas to share it', async () => {
    await expect(openProxyStores({ kind: 'memory' }, 'key')).rejects.toThrow(/--state-key needs a shared --store/);
  });

  it('says why a PostgreSQL store cannot be opened, without the password', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'emcp-store-url-'));
    const refused = openProxyStores(
      { kind: 'postgres', url: `postgres://proxy:hunter2@localhost/none?host=${encodeURIComponent(folder)}` },
      join(folder, 'state.key'),
    );
    await expect(refused).rejects.toThrow(/cannot open the store on PostgreSQL: .+/);
    await expect(refused).rejects.not.toThrow(/hunter2/);
  });

  it.skipIf(!postgresAvailable)(
    `shares scopes and spent request states between two openings of one database ${postgresUnavailable}`,
    async () => {
      const url = await createTestDatabase();
      const keyPath = join(mkdtempSync(join(tmpdir(), 'emcp-store-url-')), 'state.key');
      const first = await openProxyStores({ kind: 'postgres', url }, keyPath);
      opened.push(first);
      const second = await openProxyStores({ kind: 'postgres', url }, keyPath);
      opened.push(second);
      expect(readFileSync(keyPath)).toHaveLength(32);
      expect(statSync(keyPath).mode & 0o777).toBe(0o600);
      await first.discoveryStore.remember('scope', ['fixture__echo']);
      expect(await second.discoveryStore.has('scope', 'fixture__echo')).toBe(true);
    },
  );
});
