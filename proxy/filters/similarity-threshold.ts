import type { SearchFilter } from '../gateway/types';

/** `filters.similarity_threshold`: drops hits whose relevance is below the threshold (0..1). */
export function similarityThreshold(options: { readonly threshold: number }): SearchFilter {
  return function similarityThreshold(hits) {
    return hits.filter((hit) => hit.similarity >= options.threshold);
  };
}
