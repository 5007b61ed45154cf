import type { CallFilter, CallRequest, CallVerdict, FilterContext } from '../pipeline';

/** What the proxy itself knows about a downstream server: never taken from tool metadata (SPEC §4.8). */
export interface AdmissionFacts {
  readonly name: string;
  readonly url?: string;
  readonly loadedAt: 'config' | 'runtime' | 'in-process';
}

/** A literal route: every fact given must match; `bundle: 'banned'` refuses the server outright. */
export interface RouteEntry {
  readonly name?: string;
  readonly url?: string;
  readonly loadedAt?: AdmissionFacts['loadedAt'];
  readonly bundle: string;
}

/** Decides a bundle for servers the map does not name (e.g. a Rego classifier); `undefined` = no opinion. */
export type RouteClassifier = (facts: AdmissionFacts) => Promise<string | undefined> | string | undefined;

/** Where a server's calls go. */
export type Route =
  | { readonly kind: 'bundle'; readonly bundle: string }
  | { readonly kind: 'banned' }
  | { readonly kind: 'pass' }
  | { readonly kind: 'refuse'; readonly why: 'unmapped' | 'unknown-server' | 'unknown-bundle' };

/** Options for {@link createRouteResolver}. */
export interface RouteResolverOptions {
  readonly routes: readonly RouteEntry[];
  /** Supplied by the proxy from its downstream registry. */
  readonly admissionOf: (serverName: string) => AdmissionFacts | undefined;
  readonly classifier?: RouteClassifier;
  /** What happens to servers neither the map nor the classifier names. */
  readonly unmapped: 'pass' | 'refuse' | { readonly bundle: string };
}

/** Resolves a server name to its {@link Route}; shared by the router (call side) and the augmenter (search side). */
export type RouteResolver = (serverName: string) => Promise<Route>;

/** The reserved bundle name that refuses a server. */
export const BANNED = 'banned';

/**
 * Builds the route resolver: literal map first (it always wins), then the classifier, then the
 * configured default. Names compare case-insensitively (NFKC); URLs after normalisation, so
 * `HTTPS://Evil.example/mcp/` is the same server as `https://evil.example/mcp`.
 */
export function createRouteResolver(options: RouteResolverOptions): RouteResolver {
  const routes = options.routes.map((route) => ({
    ...route,
    normalisedName: route.name === undefined ? undefined : normaliseName(route.name),
    normalisedUrl: route.url === undefined ? undefined : normaliseUrl(route.url),
  }));
  const toRoute = (bundle: string): Route =>
    bundle.toLowerCase() === BANNED ? { kind: 'banned' } : { kind: 'bundle', bundle };
  return async function resolveRoute(serverName: string): Promise<Route> {
    const facts = options.admissionOf(serverName);
    // An unknown server has no admission facts the proxy vouches for: refuse.
    if (!facts) return { kind: 'refuse', why: 'unknown-server' };
    const name = normaliseName(facts.name);
    const url = facts.url === undefined ? undefined : normaliseUrl(facts.url);
    // 1. The literal map wins.
    for (const route of routes) {
      if (route.normalisedName !== undefined && route.normalisedName !== name) continue;
      if (route.normalisedUrl !== undefined && route.normalisedUrl !== url) continue;
      if (route.loadedAt !== undefined && route.loadedAt !== facts.loadedAt) continue;
      if (route.normalisedName === undefined && route.normalisedUrl === undefined && route.loadedAt === undefined)
        continue;
      return toRoute(route.bundle);
    }
    // 2. The classifier, for servers the map does not name.
    const classified = options.classifier ? await options.classifier(facts) : undefined;
    if (typeof classified === 'string' && classified.length > 0) return toRoute(classified);
    // 3. The configured default.
    if (options.unmapped === 'pass') return { kind: 'pass' };
    if (options.unmapped === 'refuse') return { kind: 'refuse', why: 'unmapped' };
    return toRoute(options.unmapped.bundle);
  };
}

/** Options for {@link bundleRouter}. */
export interface BundleRouterOptions {
  readonly resolve: RouteResolver;
  /** Bundle name → its call filter (normally `singleUseFilter` around `policyFilter`). */
  readonly bundles: Readonly<Record<string, CallFilter>>;
}

/**
 * The bundle router call filter (SPEC §4.8): sends each downstream call to the filter of the bundle
 * that governs its server. Local tools (no server) are not routed. A route to a bundle that is not
 * loaded refuses: a typo in config must not become "ungoverned".
 */
export function bundleRouter(options: BundleRouterOptions): CallFilter {
  return async function bundleRouter(request: CallRequest, context: FilterContext): Promise<CallVerdict> {
    if (request.server === undefined) return { decision: 'allow' };
    const route = await options.resolve(request.server);
    switch (route.kind) {
      case 'pass':
        return { decision: 'allow' };
      case 'banned':
        return {
          decision: 'deny',
          reason: `Server ${request.server} is banned by the operator; its tools cannot be called.`,
        };
      case 'refuse':
        return {
          decision: 'deny',
          reason: `No policy governs server ${request.server}, and ungoverned servers are refused.`,
        };
      case 'bundle': {
        const filter = Object.hasOwn(options.bundles, route.bundle) ? options.bundles[route.bundle] : undefined;
        if (!filter)
          return {
            decision: 'deny',
            reason: `The policy for server ${request.server} is not available, so the call is refused.`,
          };
        return filter(request, context);
      }
    }
  };
}

/** Case-folds and NFKC-normalises a server name. */
export function normaliseName(name: string): string {
  return name.normalize('NFKC').trim().toLowerCase();
}

/**
 * Normalises a URL for comparison: lowercase scheme and host (URL does this), default port
 * dropped, no fragment, no trailing slashes on the path. An unparsable URL is kept verbatim,
 * lowercased, so it can still match a literal ban.
 */
export function normaliseUrl(url: string): string {
  try {
    const parsed = new URL(url.trim());
    parsed.hash = '';
    const path = parsed.pathname.replace(/\/+$/, '');
    return `${parsed.protocol}//${parsed.host}${path}${parsed.search}`;
  } catch {
    return url.trim().toLowerCase().replace(/\/+$/, '');
  }
}
