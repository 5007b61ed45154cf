import type { DiscoveryStore } from './discovery-store';
import type { CallFilter } from './types';

/**
 * The discovery gate (SPEC §3.5): a tool may be called only if `search_tools` returned it in
 * the same MCP session. A session the store has forgotten has discovered nothing: deny.
 */
export function discoveryGate(options: { readonly store: DiscoveryStore }): CallFilter {
  return async function discoveryGate(request, context) {
    if (await options.store.has(context.session, request.tool)) return { decision: 'allow' };
    return {
      decision: 'deny',
      reason: `Tool "${request.tool}" has not been discovered in this session. Search first: call search_tools, then call_tool with an exact name from its results.`,
    };
  };
}
