import type { CallFilter, SearchFilter } from '../gateway/types';
import { matchNameGlob } from './match-name-glob';

/** `filters.access_control` (SPEC §3.7). */
export interface AccessControlOptions {
  /** Exact qualified names that are hidden and refused. */
  readonly deny?: readonly string[];
  /** Globs over qualified names (`github__delete_*`); `*` and `?` also match `/`. */
  readonly denyPatterns?: readonly string[];
  /** When set, only these servers' tools are visible. Local tools are exempt from this, not from deny. */
  readonly allowServers?: readonly string[];
}

/** Builds the visibility predicate shared by the search and call sides. */
export function accessPredicate(options: AccessControlOptions): (name: string, server: string | undefined) => boolean {
  const deny = new Set(options.deny ?? []);
  // `/` is an ordinary character here: `*__delete_*` also hides a tool named `delete_a/b`.
  const denyMatch = matchNameGlob(options.denyPatterns ?? []);
  const allowServers = options.allowServers ? new Set(options.allowServers) : undefined;
  return (name, server) => {
    if (deny.has(name) || denyMatch(name)) return false;
    return server === undefined || allowServers === undefined || allowServers.has(server);
  };
}

/**
 * Access control on both sides: hidden tools are removed from search results before the top-k
 * cut, and calls to them are refused even if the model guesses the name.
 */
export function accessControl(options: AccessControlOptions): { search: SearchFilter; call: CallFilter } {
  const visible = accessPredicate(options);
  return {
    search: function accessControl(hits) {
      return hits.filter((hit) => visible(hit.name, hit.server?.name));
    },
    call: function accessControl(request) {
      return visible(request.tool, request.server?.name)
        ? { decision: 'allow' }
        : { decision: 'deny', reason: `Tool "${request.tool}" is not available (blocked by access control).` };
    },
  };
}
