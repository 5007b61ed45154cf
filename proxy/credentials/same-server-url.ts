/**
 * The form of a URL used for credential binding: the URL as `fetch` will resolve it (WHATWG
 * parsing lowercases scheme and host, punycodes look-alike hosts and drops a default port), with
 * one trailing `/` of the path ignored. Nothing else is relaxed: path case, query, fragment,
 * userinfo and port all still have to match. `undefined` for anything that is not http(s).
 */
export function bindingUrl(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return undefined;
  const path = parsed.pathname.endsWith('/') ? parsed.pathname.slice(0, -1) : parsed.pathname;
  return `${parsed.protocol}//${parsed.username}:${parsed.password}@${parsed.host}${path}${parsed.search}${parsed.hash}`;
}

/**
 * Whether a connection URL is the URL the operator configured (SPEC §3.9 URL binding). Fails
 * closed: an unparsable URL on either side never matches.
 */
export function sameServerUrl(configured: string, connection: string): boolean {
  const left = bindingUrl(configured);
  return left !== undefined && left === bindingUrl(connection);
}
