import picomatch from 'picomatch';
import { ProxyError } from '../errors';
import type { LoadFilter } from '../gateway/types';
import { matchNameGlob } from './match-name-glob';

/** `filters.load_control` (SPEC §3.7). */
export interface LoadControlOptions {
  readonly denyNames?: readonly string[];
  readonly denyNamePatterns?: readonly string[];
  readonly denyUrlPatterns?: readonly string[];
  /** When non-empty, a URL must match one of these. */
  readonly allowUrlPatterns?: readonly string[];
}

const defaultPorts: Record<string, string> = { http: '80', https: '443' };

interface ParsedUrl {
  readonly scheme: string;
  readonly host: string;
  readonly port: string;
  readonly path: string;
  readonly hasCredentials: boolean;
}

/** Parses with the WHATWG parser, so the host is what a client would really connect to. */
function parseUrl(url: string): ParsedUrl | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  const scheme = parsed.protocol.slice(0, -1);
  if (!(scheme in defaultPorts)) return undefined;
  return {
    scheme,
    host: parsed.hostname,
    port: parsed.port || (defaultPorts[scheme] ?? ''),
    path: `${parsed.pathname}${parsed.search}`,
    hasCredentials: parsed.username !== '' || parsed.password !== '',
  };
}

type UrlMatcher = (url: ParsedUrl) => boolean;

/**
 * Why picomatch cannot compile `glob`, or `undefined` when it can. Without `debug`, picomatch
 * turns a glob whose regex is invalid (`[z-a]`, `{a,b`) into one that never matches: for a deny
 * pattern that would fail open, so such a glob is an error instead.
 */
export function globProblem(glob: string): string | undefined {
  try {
    picomatch.makeRe(glob, { dot: true, debug: true });
    return undefined;
  } catch (error) {
    const reason = error instanceof Error ? (/: ([^:]+)$/.exec(error.message)?.[1] ?? error.message) : String(error);
    return `invalid glob "${glob}" (${reason})`;
  }
}

/** A URL pattern split into the globs each part of a parsed URL is checked against. */
interface UrlPatternParts {
  readonly scheme: string;
  readonly host: string;
  /** Digits or `*`; `undefined` when the pattern states no port. */
  readonly port: string | undefined;
  readonly path: string;
}

const urlPatternShape = 'expected scheme://host[:port]/path';

/** Splits `scheme://host[:port]/path` into its part globs, or says why the pattern is not one. */
function splitUrlPattern(pattern: string): UrlPatternParts | string {
  const invalid = (detail: string) => `invalid URL pattern "${pattern}": ${detail}`;
  const match = /^([a-z*]+):\/\/([^/]+)(\/.*)?$/i.exec(pattern.trim());
  if (!match) return invalid(urlPatternShape);
  const [, scheme = '', authority = '', path = '/*'] = match;
  const portMatch = /^(.*?)(?::(\d+|\*))?$/.exec(authority);
  const host = (portMatch?.[1] ?? authority).toLowerCase();
  // A host glob that kept a ':' or an '@' would be compared with a bare host name and never
  // match: a deny pattern like that would fail open.
  if (host === '' || host.includes('@')) return invalid(`the host must be a host name glob; ${urlPatternShape}`);
  if (host.includes(':')) return invalid(`the port must be digits or *; ${urlPatternShape}`);
  for (const glob of [scheme, host, path]) {
    const problem = globProblem(glob);
    if (problem) return invalid(problem);
  }
  return { scheme: scheme.toLowerCase(), host, port: portMatch?.[2], path };
}

/**
 * Why `pattern` is not a usable URL pattern (`scheme://host[:port]/path` with globs picomatch can
 * compile), or `undefined` when it is. The config schema checks with this, so a pattern the
 * config accepts always compiles in {@link loadControl}.
 */
export function urlPatternProblem(pattern: string): string | undefined {
  const parts = splitUrlPattern(pattern);
  return typeof parts === 'string' ? parts : undefined;
}

/**
 * Compiles `scheme://host[:port]/path` into a matcher that checks each part against the parsed
 * URL's own part. The host glob never sees the path, so `https://*.corp.example/*` cannot be
 * satisfied by `https://attacker.example/x.corp.example/mcp`. `mode` decides how an unstated
 * port reads: an allow pattern narrows (default port only), a deny pattern broadens (any port).
 */
function compileUrlPattern(pattern: string, mode: 'allow' | 'deny'): UrlMatcher {
  const parts = splitUrlPattern(pattern);
  if (typeof parts === 'string') throw new ProxyError('config-invalid', parts);
  const scheme = picomatch(parts.scheme);
  const host = picomatch(parts.host, { dot: true });
  const path = picomatch(parts.path, { dot: true, bash: true });
  return (url) => {
    if (!scheme(url.scheme) || !host(url.host) || !path(url.path)) return false;
    if (parts.port === '*') return true;
    if (parts.port !== undefined) return url.port === parts.port;
    return mode === 'deny' || url.port === defaultPorts[url.scheme];
  };
}

/** Compiles name deny globs; a glob picomatch cannot compile is an error, never a silent no-match. */
function compileNamePatterns(patterns: readonly string[]): (name: string) => boolean {
  if (patterns.length === 0) return () => false;
  const problem = patterns.map(globProblem).find((found) => found !== undefined);
  if (problem) throw new ProxyError('config-invalid', problem);
  return matchNameGlob(patterns);
}

/**
 * Load control: refuses `load_mcp_server` by name or URL before any connection is made. Allow
 * patterns narrow and deny patterns broaden; an unparseable or non-http(s) URL is refused, and so
 * is a URL carrying credentials when allow patterns are set. A malformed pattern throws a
 * `config-invalid` {@link ProxyError} when the filter is built (the config schema refuses it earlier).
 */
export function loadControl(options: LoadControlOptions): LoadFilter {
  const denyNames = new Set(options.denyNames ?? []);
  const denyName = compileNamePatterns(options.denyNamePatterns ?? []);
  const denyUrls = (options.denyUrlPatterns ?? []).map((pattern) => compileUrlPattern(pattern, 'deny'));
  const allowUrls = (options.allowUrlPatterns ?? []).map((pattern) => compileUrlPattern(pattern, 'allow'));
  return function loadControl(request) {
    if (denyNames.has(request.serverName) || denyName(request.serverName)) {
      return { decision: 'deny', reason: `Loading a server named "${request.serverName}" is not allowed.` };
    }
    const url = parseUrl(request.url);
    if (!url) return { decision: 'deny', reason: `"${request.url}" is not a valid http(s) URL.` };
    if (denyUrls.some((matches) => matches(url))) {
      return { decision: 'deny', reason: `Loading servers from ${request.url} is not allowed.` };
    }
    if (allowUrls.length > 0 && (url.hasCredentials || !allowUrls.some((matches) => matches(url)))) {
      return { decision: 'deny', reason: `${request.url} is not on the list of allowed server URLs.` };
    }
    return { decision: 'allow' };
  };
}
