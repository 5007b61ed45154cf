import { lookup as systemLookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { ProxyError } from '../errors';
import type { LoadFilter } from '../gateway/types';

/** One address a host name resolved to. */
export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/**
 * Resolves a host name for a runtime load. Injectable so tests (and hosts with their own DNS
 * policy) decide what a name maps to; the default is the system resolver.
 */
export type LoadResolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

/** What the safe default for runtime loads allows (SPEC §3.4). */
export interface SafeLoadOptions {
  /** The operator's opt-in to `http://localhost` (and loopback addresses) for runtime loads. */
  readonly allowLocalhost?: boolean;
  readonly resolve?: LoadResolver;
}

/** The system resolver, every address, in the order the system gives them. */
export const systemResolver: LoadResolver = async (hostname) =>
  (await systemLookup(hostname, { all: true, verbatim: true })).map(({ address, family }) => ({
    address,
    family: family === 6 ? 6 : 4,
  }));

function subnets(family: 'ipv4' | 'ipv6', ranges: readonly (readonly [string, number])[]): BlockList {
  const list = new BlockList();
  for (const [network, prefix] of ranges) list.addSubnet(network, prefix, family);
  return list;
}

/** IPv4 ranges that are not the public internet (RFC 6890 special-purpose registry). */
const refusedIpv4 = subnets('ipv4', [
  ['0.0.0.0', 8], // "this network": 0.0.0.0 reaches the local host
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata endpoints
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
]);
const loopbackIpv4 = subnets('ipv4', [['127.0.0.0', 8]]);
/** Only global unicast IPv6 is the public internet; everything else (loopback, ULA, link-local, mapped, NAT64) is refused. */
const globalIpv6 = subnets('ipv6', [['2000::', 3]]);
const refusedIpv6 = subnets('ipv6', [
  ['2001::', 23], // IETF protocol assignments, Teredo
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: embeds an IPv4 address
]);

/** The IPv4 address inside an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`, `::ffff:7f00:1`). */
function mappedIpv4(address: string): string | undefined {
  let canonical: string;
  try {
    canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return undefined;
  }
  const match = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(canonical);
  if (!match) return undefined;
  const high = Number.parseInt(match[1] ?? '', 16);
  const low = Number.parseInt(match[2] ?? '', 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}

const notPublic = 'a private, loopback, link-local or reserved address';

/**
 * Why a runtime load may not connect to `address`, or `undefined` when it is a public address
 * (or loopback, when the operator opted in). Mapped IPv6 forms are judged by their IPv4 address.
 */
export function addressProblem(address: string, options: SafeLoadOptions = {}): string | undefined {
  const bare = address.replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 0) return `"${address}" is not an IP address`;
  const ipv4 = family === 4 ? bare : mappedIpv4(bare);
  if (ipv4 !== undefined) {
    if (options.allowLocalhost && loopbackIpv4.check(ipv4, 'ipv4')) return undefined;
    return refusedIpv4.check(ipv4, 'ipv4') ? notPublic : undefined;
  }
  if (options.allowLocalhost && isLoopback(bare)) return undefined;
  return globalIpv6.check(bare, 'ipv6') && !refusedIpv6.check(bare, 'ipv6') ? undefined : notPublic;
}

/** Whether `address` (an IP address) is a loopback address, in any of its spellings. */
function isLoopback(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  const ipv4 = family === 4 ? address : mappedIpv4(address);
  if (ipv4 !== undefined) return loopbackIpv4.check(ipv4, 'ipv4');
  return new URL(`http://[${address}]/`).hostname === '[::1]';
}

function isLocalhostName(host: string): boolean {
  return host === 'localhost' || host.endsWith('.localhost');
}

/** The URL's host without IPv6 brackets, lower-case (the WHATWG parser already normalised `127.1`, `2130706433`). */
function bareHost(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/**
 * Why `url` may not be loaded at runtime before any lookup, or `undefined`: `https:` only
 * (`http:` only for localhost when the operator opted in), no credentials in the URL, no IP
 * literal (loopback ones only with the opt-in), no `localhost` without it.
 */
export function loadUrlProblem(url: string, options: SafeLoadOptions = {}): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `"${url}" is not a valid URL`;
  }
  const host = bareHost(parsed);
  const local = isLocalhostName(host) || isLoopback(host);
  const https = parsed.protocol === 'https:';
  if (!https && !(parsed.protocol === 'http:' && options.allowLocalhost && local)) {
    return options.allowLocalhost
      ? 'only https: URLs (or http: to localhost) can be loaded'
      : 'only https: URLs can be loaded';
  }
  if (parsed.username !== '' || parsed.password !== '') return 'a server URL must not carry a user name or password';
  if (local) {
    return options.allowLocalhost ? undefined : 'loading servers from localhost is not enabled by the operator';
  }
  if (isIP(host) !== 0) return 'a server URL must name its host, not an IP address';
  return undefined;
}

/** Resolves `hostname` and refuses it unless every address is allowed; the addresses to connect to otherwise. */
async function checkedAddresses(hostname: string, options: SafeLoadOptions): Promise<readonly ResolvedAddress[]> {
  const resolve = options.resolve ?? systemResolver;
  let addresses: readonly ResolvedAddress[];
  try {
    addresses = await resolve(hostname);
  } catch (error) {
    throw new ProxyError('load-failed', `The host "${hostname}" could not be resolved.`, { cause: error });
  }
  if (addresses.length === 0) throw new ProxyError('load-failed', `The host "${hostname}" could not be resolved.`);
  // Every address must pass: a name that also points inside the network is refused outright.
  if (addresses.some((resolved) => addressProblem(resolved.address, options) !== undefined)) {
    throw new ProxyError('load-failed', `The host "${hostname}" resolves to ${notPublic}; it cannot be loaded.`);
  }
  return addresses;
}

/**
 * The safe default for `load_mcp_server` (SPEC §3.4), a load filter that runs whatever
 * `load_control` says: refuses a URL by its shape, then resolves the host once for a clear early
 * refusal. That early lookup is only for the message; the binding check is the connection's own
 * lookup in {@link safeLoadDispatcher}, so a name that changes its answer (DNS rebinding) gains nothing.
 */
export function safeLoad(options: SafeLoadOptions = {}): LoadFilter {
  return async function safeLoad(request) {
    const problem = loadUrlProblem(request.url, options);
    if (problem) return { decision: 'deny', reason: `Refused to load "${request.serverName}": ${problem}.` };
    const host = bareHost(new URL(request.url));
    if (isIP(host) !== 0 || isLocalhostName(host)) return { decision: 'allow' };
    try {
      await checkedAddresses(host, options);
    } catch (error) {
      const reason = ProxyError.isInstance(error) ? error.message : 'The host could not be checked.';
      return { decision: 'deny', reason: `Refused to load "${request.serverName}": ${reason}` };
    }
    return { decision: 'allow' };
  };
}

/** What {@link safeLoadDispatcher} needs besides the safe-load options. */
export interface SafeDispatcherOptions extends SafeLoadOptions {
  /** Told why a connection was refused (the transport's own error says only that fetch failed). */
  readonly onRefused?: (reason: string) => void;
  /** How long a new connection may take to open, its lookup included; default undici's 10 s. */
  readonly connectTimeoutMs?: number;
}

/**
 * An undici dispatcher for a runtime-loaded server's HTTP connections. The address check runs in
 * the connection's own lookup, so the address checked is the address connected; an IP host (no
 * lookup) is checked before connecting. Each new connection checks again.
 */
export function safeLoadDispatcher(options: SafeDispatcherOptions = {}): Agent {
  const refuse = (error: unknown): Error => {
    const reason = ProxyError.isInstance(error) ? error.message : 'The connection was refused.';
    options.onRefused?.(reason);
    return error instanceof Error ? error : new ProxyError('load-failed', reason);
  };
  const lookup = ((hostname, lookupOptions, callback) => {
    checkedAddresses(hostname, options).then(
      (addresses) => {
        const wanted = lookupOptions.family === 4 || lookupOptions.family === 6 ? lookupOptions.family : undefined;
        const usable = addresses.filter((resolved) => wanted === undefined || resolved.family === wanted);
        const first = usable[0];
        if (!first) {
          callback(refuse(new ProxyError('load-failed', `The host "${hostname}" has no usable address.`)), '', 0);
        } else if (lookupOptions.all) {
          (callback as unknown as (error: null, addresses: ResolvedAddress[]) => void)(null, [...usable]);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (error: unknown) => callback(refuse(error), '', 0),
    );
  }) as LookupFunction;
  const connector = buildConnector({
    lookup,
    ...(options.connectTimeoutMs !== undefined && { timeout: options.connectTimeoutMs }),
  });
  return new Agent({
    connect(connectOptions, callback) {
      const host = connectOptions.hostname.replace(/^\[(.*)\]$/, '$1');
      const problem = isIP(host) === 0 ? undefined : addressProblem(host, options);
      if (problem) {
        callback(
          refuse(new ProxyError('load-failed', `The address ${host} is ${problem}; it cannot be loaded.`)),
          null,
        );
        return;
      }
      connector(connectOptions, callback);
    },
  });
}
