import { randomBytes } from 'node:crypto';
import { linkSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ProxyError } from '../errors';
import { type DiscoveryStore, memoryDiscoveryStore } from '../gateway/discovery-store';
import { createPostgresDiscoveryStore, postgresDiscoveryStoreMigrations } from '../gateway/postgres-discovery-store';
import { openSqliteDiscoveryStore } from '../gateway/sqlite-discovery-store';
import { createInputRounds, type InputRounds, localInputRounds } from '../meta-tools/input-rounds';
import { createPostgresPinStore, openPostgresPinStore, postgresPinStoreMigrations } from '../pins/postgres-pin-store';
import { openSqlitePinStore } from '../pins/sqlite-pin-store';
import type { PinStore } from '../pins/types';
import { openPostgresPool } from '../store/open-postgres-pool';
import { createPostgresSpentLedger, postgresSpentLedgerMigrations } from '../store/postgres-spent-ledger';
import { openSqliteSpentLedger } from '../store/spent-ledger';

/** Where the CLI keeps its state (`--store`): discovery scopes, tool pins and spent request states. */
export type StoreLocation =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'postgres'; readonly url: string }
  | { readonly kind: 'memory' };

/**
 * Parses `--store URL` (or `EXTENSIBLE_MCP_STORE`, which keeps a password out of the process
 * list): `sqlite:PATH` (relative to the working folder), `postgres://…` or `postgresql://…` (one
 * database shared by every replica), or `memory:` for state that ends with the process. Without
 * either: `sqlite:<the config's folder>/proxy.sqlite`. Any other value is a usage error naming
 * what is accepted, and never echoes a PostgreSQL URL (it may hold a password).
 */
export function parseStoreUrl(value: string | undefined, configPath: string): StoreLocation {
  if (value === undefined) return { kind: 'sqlite', path: join(dirname(resolve(configPath)), 'proxy.sqlite') };
  if (value === 'memory:') return { kind: 'memory' };
  if (value.startsWith('sqlite:') && value.length > 'sqlite:'.length) {
    return { kind: 'sqlite', path: resolve(value.slice('sqlite:'.length)) };
  }
  if (/^postgres(ql)?:\/\//.test(value)) {
    if (!URL.canParse(value)) throw new ProxyError('config-invalid', '--store: the PostgreSQL URL does not parse.');
    return { kind: 'postgres', url: value };
  }
  throw new ProxyError(
    'config-invalid',
    `--store: "${value.slice(0, 200)}" is not a store URL; use sqlite:FILE, postgres://… or memory:.`,
  );
}

/** How the log names a store location: a PostgreSQL URL without its user, password or options. */
export function describeStore(location: StoreLocation): string {
  if (location.kind === 'memory') return 'memory (forgotten at exit)';
  if (location.kind === 'sqlite') return `sqlite:${location.path}`;
  const url = new URL(location.url);
  const socket = url.searchParams.get('host');
  return `postgres: database ${decodeURIComponent(url.pathname.slice(1)) || '(default)'} on ${socket ?? url.host}`;
}

/** The stores the CLI opens from `--store`: the gateway's discovery and pin stores and the input rounds. */
export interface ProxyStores {
  readonly discoveryStore: DiscoveryStore;
  /** Tool pins (SPEC §3.13); for `memory:`, pins that end with the process (the CLI says so). */
  readonly pinStore: PinStore;
  readonly rounds: InputRounds;
  /** Closes what the stores hold open (a file, a pool); after the gateway has closed. */
  close(): Promise<void>;
}

/**
 * Opens the stores at `location` (SPEC §3.5, §3.12, §11). For a shared store (SQLite, PostgreSQL)
 * the spent request states live in it and the request states' HMAC key in a file outside it
 * (`stateKeyPath`; default for SQLite `<file>.key`, required for PostgreSQL, where every replica
 * must be given the same file), so a retry may reach any proxy on that store. The key file is made
 * on first start (32 random bytes, readable by the owner only) and never stored in the database.
 * A memory store's rounds are this process's own.
 */
export async function openProxyStores(location: StoreLocation, stateKeyPath?: string): Promise<ProxyStores> {
  if (location.kind === 'memory') {
    if (stateKeyPath !== undefined) throw new ProxyError('config-invalid', '--state-key needs a shared --store');
    const pinStore = openSqlitePinStore({ path: ':memory:' });
    return {
      discoveryStore: memoryDiscoveryStore(),
      pinStore,
      rounds: localInputRounds(),
      close: () => pinStore.close(),
    };
  }
  if (location.kind === 'sqlite') {
    const key = readStateKey(stateKeyPath ?? `${location.path}.key`);
    const discoveryStore = openSqliteDiscoveryStore({ path: location.path });
    const pinStore = openSqlitePinStore({ path: location.path });
    const ledger = openSqliteSpentLedger(location.path);
    return {
      discoveryStore,
      pinStore,
      rounds: createInputRounds({ key, ledger }),
      close: async () => {
        await discoveryStore.close();
        await pinStore.close();
        await ledger.close();
      },
    };
  }
  if (stateKeyPath === undefined) {
    throw new ProxyError(
      'config-invalid',
      '--store postgres://… needs --state-key FILE: the request-state key every replica shares, kept outside the database',
    );
  }
  const key = readStateKey(stateKeyPath);
  const pool = await openPostgresPool({
    url: location.url,
    migrations: {
      discovery: postgresDiscoveryStoreMigrations,
      spent: postgresSpentLedgerMigrations,
      pins: postgresPinStoreMigrations,
    },
    what: 'store',
  });
  return {
    discoveryStore: createPostgresDiscoveryStore(pool),
    pinStore: createPostgresPinStore(pool),
    rounds: createInputRounds({ key, ledger: createPostgresSpentLedger(pool) }),
    close: () => pool.end(),
  };
}

/**
 * Opens only the pin store at `location` (transparent mode, which keeps no discovery scopes): the
 * same tables as {@link openProxyStores} opens, so the pins commands find them. The caller closes it.
 */
export function openPinStore(location: StoreLocation): Promise<PinStore> | PinStore {
  if (location.kind === 'postgres') return openPostgresPinStore({ url: location.url });
  return openSqlitePinStore({ path: location.kind === 'memory' ? ':memory:' : location.path });
}

/**
 * Reads the request-state key at `keyPath`, creating it first if it does not exist, and refuses one
 * that group or others may read. A new key is written whole beside it and then linked into place,
 * which fails if the name exists: of replicas starting at once one key wins, and none reads it
 * half-written.
 */
function readStateKey(keyPath: string): Buffer {
  const draft = `${keyPath}.${process.pid}.${randomBytes(6).toString('hex')}`;
  try {
    writeFileSync(draft, randomBytes(32), { flag: 'wx', mode: 0o600 });
    linkSync(draft, keyPath);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw new ProxyError('store-failed', `cannot create the request-state key ${keyPath}`, { cause: error });
    }
  } finally {
    rmSync(draft, { force: true });
  }
  let key: Buffer;
  let mode: number;
  try {
    key = readFileSync(keyPath);
    mode = statSync(keyPath).mode & 0o777;
  } catch (error) {
    throw new ProxyError('store-failed', `cannot read the request-state key ${keyPath}`, { cause: error });
  }
  // A key others can read signs request states for them: refuse it, as ssh refuses an open private
  // key. A key checked out from a repository (0644) is the case this catches. (Windows has no such
  // bits to read.)
  if (process.platform !== 'win32' && (mode & 0o077) !== 0)
    throw new ProxyError(
      'store-failed',
      `the request-state key ${keyPath} is readable by others (mode ${mode.toString(8).padStart(4, '0')}); make it the owner's only: chmod 600 ${keyPath}`,
    );
  if (key.length < 32)
    throw new ProxyError('store-failed', `the request-state key ${keyPath} is shorter than 32 bytes`);
  return key;
}
