import picomatch from 'picomatch';
import type { SearchFilter } from '../gateway/types';

/**
 * A search filter that hides tools whose qualified name matches any glob. Hidden tools can
 * never be discovered, so the discovery gate also refuses to call them.
 */
export function hideTools(options: { readonly patterns: readonly string[] }): SearchFilter {
  const hidden = picomatch([...options.patterns], { dot: true });
  return function hideTools(hits) {
    return hits.filter((hit) => !hidden(hit.name));
  };
}
