import { dirname, join, resolve } from 'node:path';
import { ProxyError } from '../errors';
import { type DiscoveryStore, memoryDiscoveryStore } from '../gateway/discovery-store';
import { openSqliteDiscoveryStore } from '../gateway/sqlite-discovery-store';

/** Where the CLI keeps its state (`--store`): discovery scopes now, tool pins and evidence later. */
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

/** How the log names a store location. */
export function describeStore(location: StoreLocation): string {
  return location.kind === 'memory' ? 'memory (forgotten at exit)' : `sqlite:${location.path}`;
}
