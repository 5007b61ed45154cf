import type { CallContext, CallFilter, CallRequest, CallVerdict, ServerFacts } from '../gateway/types';

/** A literal route: every fact given must match; `bundle: 'banned'` refuses the server outright. */
export interface RouteEntry {
  readonly name?: string;
  readonly url?: string;
  readonly admission?: ServerFacts['admission'];
  readonly bundle: string;
}

/** Decides a bundle for servers the map does not name (e.g. a Rego classifier); `undefined` = no opinion. */
export type RouteClassifier = (facts: ServerFacts) => Promise<string | undefined> | string | undefined;

/** Where a server's calls go. */
export type Route =
  | { readonly kind: 'bundle'; readonly bundle: string }
  | { readonly kind: 'banned' }
  | { readonly kind: 'pass' }
  | { readonly kind: 'refuse'; readonly why: 'unmapped' | 'unknown-bundle' };

/** Options for {@link createRouteResolver}. */
export interface RouteResolverOptions {
  readonly routes: readonly RouteEntry[];
  readonly classifier?: RouteClassifier;
  /** What happens to servers neither the map nor the classifier names. */
  readonly unmapped: 'pass' | 'refuse' | { readonly bundle: string };
}

/**
 * Resolves a server's admission facts, as the gateway stamps them, to its {@link Route}; shared by
 * the router (call side), the augmenter (search side) and the gateway's credential-field stamp.
 */
export type RouteResolver = (facts: ServerFacts) => Promise<Route>;

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
  return async function resolveRoute(facts: ServerFacts): Promise<Route> {
    const name = normaliseName(facts.name);
    const url = facts.url === undefined ? undefined : normaliseUrl(facts.url);
    // 1. The literal map wins.
    for (const route of routes) {
      if (route.normalisedName !== undefined && route.normalisedName !== name) continue;
      if (route.normalisedUrl !== undefined && route.normalisedUrl !== url) continue;
      if (route.admission !== undefined && route.admission !== facts.admission) continue;
      if (route.normalisedName === undefined && route.normalisedUrl === undefined && route.admission === undefined)
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
  return async function bundleRouter(request: CallRequest, context: CallContext): Promise<CallVerdict> {
    if (request.server === undefined) {
      // A local tool has no server; an unknown name has nothing the gateway vouches for: refuse it.
      return request.toolName === undefined
        ? { decision: 'deny', reason: `Tool "${request.tool}" is unknown, so no policy can allow it.` }
        : { decision: 'allow' };
    }
    const server = request.server.name;
    const route = await options.resolve(request.server);
    switch (route.kind) {
      case 'pass':
        return { decision: 'allow' };
      case 'banned':
        return {
          decision: 'deny',
          reason: `Server ${server} is banned by the operator; its tools cannot be called.`,
        };
      case 'refuse':
        return {
          decision: 'deny',
          reason: `No policy governs server ${server}, and ungoverned servers are refused.`,
        };
      case 'bundle': {
        const filter = Object.hasOwn(options.bundles, route.bundle) ? options.bundles[route.bundle] : undefined;
        if (!filter)
          return {
            decision: 'deny',
            reason: `The policy for server ${server} is not available, so the call is refused.`,
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
