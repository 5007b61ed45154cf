import type { CallContext, SearchFilter, SearchHit, SearchQuery, ServerFacts } from '../gateway/types';
import type { RouteResolver } from './bundle-router';
import type { PolicyBundle } from './load-bundle';

/** Options for {@link policyAugmenter}. */
export interface PolicyAugmenterOptions {
  readonly resolve: RouteResolver;
  readonly bundles: Readonly<Record<string, PolicyBundle>>;
}

/**
 * The search-side augmenter (SPEC §4.8): each governed tool's schema gains its bundle's credential
 * parameters (always-required ones in `required`) and its description one plain sentence per
 * credential. Order and scores are untouched, so augmentation never changes ranking.
 */
export function policyAugmenter(options: PolicyAugmenterOptions): SearchFilter {
  return async function policyAugmenter(
    hits: readonly SearchHit[],
    _query: SearchQuery,
    _context: CallContext,
  ): Promise<readonly SearchHit[]> {
    const cache = new Map<string, PolicyBundle | undefined>();
    const bundleOf = async (server: ServerFacts): Promise<PolicyBundle | undefined> => {
      if (!cache.has(server.name)) {
        const route = await options.resolve(server);
        cache.set(
          server.name,
          route.kind === 'bundle' && Object.hasOwn(options.bundles, route.bundle)
            ? options.bundles[route.bundle]
            : undefined,
        );
      }
      return cache.get(server.name);
    };
    const augmented: SearchHit[] = [];
    for (const hit of hits) {
      const bundle = hit.server === undefined ? undefined : await bundleOf(hit.server);
      augmented.push(bundle ? augmentHit(hit, bundle) : hit);
    }
    return augmented;
  };
}

type Properties = NonNullable<SearchHit['inputSchema']['properties']>;

/** One hit with its bundle's credential parameters and sentences added. */
function augmentHit(hit: SearchHit, bundle: PolicyBundle): SearchHit {
  const manifestProperties = (bundle.manifest.properties ?? {}) as Record<string, Record<string, unknown>>;
  const properties: Record<string, unknown> = { ...(hit.inputSchema.properties ?? {}) };
  const required = new Set(hit.inputSchema.required ?? []);
  const sentences: string[] = [];
  for (const entry of bundle.fetchPlan.entries) {
    if (!bundle.fetchPlan.credentialFields.includes(entry.field) || entry.source.kind !== 'call') continue;
    const argumentName = entry.source.params.path.slice('arguments.'.length);
    const credential = bundle.guidance.credentials[entry.field];
    properties[argumentName] = {
      ...(manifestProperties[entry.field] ?? entry.schema),
      ...(credential ? { description: credential.sentence } : {}),
    };
    if (entry.guard?.always !== false) required.add(argumentName);
    if (credential) sentences.push(credential.sentence);
  }
  const description = sentences.length > 0 ? `${hit.description} ${sentences.join(' ')}`.trim() : hit.description;
  return {
    ...hit,
    description,
    inputSchema: { ...hit.inputSchema, properties: properties as Properties, required: [...required] },
  };
}
