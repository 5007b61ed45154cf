import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ProxyError } from '../errors';
import { type DiscoveryStore, memoryDiscoveryStore } from '../gateway/discovery-store';
import { openSqliteDiscoveryStore } from '../gateway/sqlite-discovery-store';
import { createInputRounds, type InputRounds, localInputRounds } from '../meta-tools/input-rounds';
import { openSqlitePinStore } from '../pins/sqlite-pin-store';
import type { PinStore } from '../pins/types';
import { openSqliteSpentLedger } from '../store/spent-ledger';

/** Where the CLI keeps its state (`--store`): discovery scopes, tool pins, spent request states. */
export type StoreLocation = { readonly kind: 'sqlite'; readonly path: string } | { readonly kind: 'memory' };

/**
 * Parses `--store URL`: `sqlite:PATH` (relative to the working folder), or `memory:` for state
 * that ends with the process. Without the flag: `sqlite:<the config's folder>/proxy.sqlite`. Any
 * other scheme is a usage error naming what is accepted.
 */
export function parseStoreUrl(value: string | undefined, configPath: string): StoreLocation {
  if (value === undefined) return { kind: 'sqlite', path: join(dirname(resolve(configPath)), 'proxy.sqlite') };
  if (value === 'memory:') return { kind: 'memory' };
  if (value.startsWith('sqlite:') && value.length > 'sqlite:'.length) {
    return { kind: 'sqlite', path: resolve(value.slice('sqlite:'.length)) };
  }
  throw new ProxyError(
    'config-invalid',
    `--store: "${value.slice(0, 200)}" is not a store URL; use sqlite:FILE or memory:.`,
  );
}

/** Opens the discovery store at `location`; the caller closes it after the gateway. */
export function openDiscoveryStore(location: StoreLocation): DiscoveryStore {
  return location.kind === 'memory' ? memoryDiscoveryStore() : openSqliteDiscoveryStore({ path: location.path });
}

/**
 * Opens the pin store (SPEC §3.13) at `location`: the same SQLite file as the discovery store, or
 * for `memory:` a store that ends with the process (every start then trusts first listings
 * again, and the CLI says so). The caller closes it after the gateway.
 */
export function openPinStore(location: StoreLocation): PinStore {
  return openSqlitePinStore({ path: location.kind === 'memory' ? ':memory:' : location.path });
}

/** How the log names a store location. */
export function describeStore(location: StoreLocation): string {
  return location.kind === 'memory' ? 'memory (forgotten at exit)' : `sqlite:${location.path}`;
}

/**
 * The input rounds (SPEC §3.12) of the proxies sharing `location`: for a SQLite store, the spent
 * request states live in its file and the HMAC key beside it (`<file>.key`, 32 random bytes made
 * on first start, readable by the owner only, never in the database), so a retry may reach any
 * proxy on that store. A memory store's rounds are this process's own.
 */
export function openInputRounds(location: StoreLocation): { rounds: InputRounds; close(): Promise<void> } {
  if (location.kind === 'memory') return { rounds: localInputRounds(), close: async () => {} };
  const keyPath = `${location.path}.key`;
  let key: Buffer;
  try {
    writeFileSync(keyPath, randomBytes(32), { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw new ProxyError('store-failed', `cannot create the request-state key ${keyPath}`, { cause: error });
    }
  }
  try {
    key = readFileSync(keyPath);
  } catch (error) {
    throw new ProxyError('store-failed', `cannot read the request-state key ${keyPath}`, { cause: error });
  }
  if (key.length < 32)
    throw new ProxyError('store-failed', `the request-state key ${keyPath} is shorter than 32 bytes`);
  const ledger = openSqliteSpentLedger(location.path);
  return { rounds: createInputRounds({ key, ledger }), close: () => ledger.close() };
}
