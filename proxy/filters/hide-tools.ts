import type { SearchFilter } from '../gateway/types';
import { matchNameGlob } from './match-name-glob';

/**
 * A search filter that hides tools whose qualified name matches any glob. Hidden tools can
 * never be discovered, so the discovery gate also refuses to call them. `*` and `?` also match
 * `/`: tool names are not paths.
 */
export function hideTools(options: { readonly patterns: readonly string[] }): SearchFilter {
  const hidden = matchNameGlob(options.patterns);
  return function hideTools(hits) {
    return hits.filter((hit) => !hidden(hit.name));
  };
}
