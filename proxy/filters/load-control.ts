import picomatch from 'picomatch';
import type { LoadFilter } from '../pipeline';

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
 * Compiles `scheme://host[:port]/path` into a matcher that checks each part against the parsed
 * URL's own part. The host glob never sees the path, so `https://*.corp.example/*` cannot be
 * satisfied by `https://attacker.example/x.corp.example/mcp`. `mode` decides how an unstated
 * port reads: an allow pattern narrows (default port only), a deny pattern broadens (any port).
 */
function compileUrlPattern(pattern: string, mode: 'allow' | 'deny'): UrlMatcher {
  const match = /^([a-z*]+):\/\/([^/]+)(\/.*)?$/i.exec(pattern.trim());
  if (!match) throw new Error(`invalid URL pattern "${pattern}": expected scheme://host[:port]/path`);
  const [, schemePart = '', authority = '', pathPart = '/*'] = match;
  const portMatch = /^(.*?)(?::(\d+|\*))?$/.exec(authority);
  const hostGlob = (portMatch?.[1] ?? authority).toLowerCase();
  const portGlob = portMatch?.[2];
  const scheme = picomatch(schemePart.toLowerCase());
  const host = picomatch(hostGlob, { dot: true });
  const path = picomatch(pathPart, { dot: true, bash: true });
  return (url) => {
    if (!scheme(url.scheme) || !host(url.host) || !path(url.path)) return false;
    if (portGlob === '*') return true;
    if (portGlob !== undefined) return url.port === portGlob;
    return mode === 'deny' || url.port === defaultPorts[url.scheme];
  };
}

/**
 * Load control: refuses `load_mcp_server` by name or URL before any connection is made. Allow
 * patterns narrow and deny patterns broaden; an unparseable or non-http(s) URL is refused, and so
 * is a URL carrying credentials when allow patterns are set.
 */
export function loadControl(options: LoadControlOptions): LoadFilter {
  const denyNames = new Set(options.denyNames ?? []);
  const denyNamePatterns = options.denyNamePatterns ?? [];
  const denyName = denyNamePatterns.length > 0 ? picomatch([...denyNamePatterns], { dot: true }) : () => false;
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
