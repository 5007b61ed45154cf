import { scopeKey } from './discovery-scope';
import type { DiscoveryStore } from './discovery-store';
import type { CallFilter } from './types';

/**
 * The discovery gate (SPEC §3.5): a tool may be called only if `search_tools` returned it in the
 * same discovery scope, checked as (principal, carrier): a handle or session id presented under
 * another principal names another scope, which holds nothing. A forgotten, expired or missing
 * scope has discovered nothing: deny.
 */
export function discoveryGate(options: { readonly store: DiscoveryStore }): CallFilter {
  return async function discoveryGate(request, context) {
    const key = scopeKey(context.principal, context.scope);
    if (key !== undefined && (await options.store.has(key, request.tool))) return { decision: 'allow' };
    const how =
      context.scope.kind === 'handle'
        ? 'Search first: call search_tools, then call_tool with an exact name from its results and the handle it returned.'
        : 'Search first: call search_tools, then call_tool with an exact name from its results.';
    const where = context.scope.kind === 'handle' ? 'under this handle' : 'in this session';
    return { decision: 'deny', reason: `Tool "${request.tool}" has not been discovered ${where}. ${how}` };
  };
}

/**
 * Transparent mode's gate (SPEC §3.5): no search there, so what may be called is what the listing
 * filters would show now: a tool the upstream lists (the gateway stamped it from the current
 * listing) that access control, which runs first, did not hide. No earlier `tools/list` is needed.
 */
export function listingGate(): CallFilter {
  return function listingGate(request) {
    if (request.toolName !== undefined) return { decision: 'allow' };
    return { decision: 'deny', reason: `Unknown tool "${request.tool}": the server does not offer it.` };
  };
}
