/**
 * The scoring constants, exported so the oracle test (`lexical-oracle.test.ts`) checks the
 * index against a naive BM25+ with the same values.
 */
export const bm25Parameters = {
  /** BM25+ term-frequency saturation. */
  k1: 1.2,
  /** BM25+ length normalisation. */
  b: 0.7,
  /** BM25+ lower bound per matched term. */
  delta: 0.5,
  /** A query word of at least this many letters also matches the longer words it starts. */
  minPrefixLength: 4,
  /** Weight of a prefix match relative to an exact match (before its length discount). */
  prefixWeight: 0.375,
} as const;
const { k1, b, delta, minPrefixLength, prefixWeight } = bm25Parameters;

/** The documents a term occurs in, for one field: rows and term frequencies, side by side. */
interface Postings {
  readonly rows: number[];
  readonly frequencies: number[];
}

/** One field of the indexed documents and its weight in the score. */
export interface LexicalField {
  readonly boost: number;
}

/** What one search found: a BM25 score per row (zero for the rows it did not match). */
export interface LexicalResult {
  /** The matched rows, in no particular order. */
  readonly rows: readonly number[];
  /** Scores indexed by row; as long as the index's row space when the search ran. */
  readonly scores: Float32Array;
  /** The highest score (0 when nothing matched). */
  readonly best: number;
}

/**
 * BM25+ over documents identified by small integer rows, with prefix expansion of query words.
 *
 * Scores accumulate in one typed array indexed by row, so a search over 10 000 tools allocates
 * a few arrays rather than an object per matching document. This is what keeps BM25 shorter
 * than the query embedding it runs beside (a general-purpose engine spent most of a 10 000-tool
 * search building per-document match records). Scoring follows the usual BM25+ with per-field
 * boosts; a document's score is multiplied by the number of distinct query words it matched,
 * so covering more of the query beats repeating one word.
 */
export class LexicalIndex {
  readonly #fields: readonly LexicalField[];
  readonly #tokenize: (text: string) => string[];
  /** term → postings per field. */
  readonly #terms = new Map<string, Postings[]>();
  /** row → distinct terms of the document (to unindex it), `undefined` for a free row. */
  readonly #rowTerms: (string[] | undefined)[] = [];
  /** field → row → number of terms. */
  readonly #lengths: number[][];
  readonly #totalLengths: number[];
  #documents = 0;
  /** Every term, sorted, for prefix expansion; rebuilt lazily after a new term appears. */
  #sorted: string[] | undefined;

  constructor(options: { readonly fields: readonly LexicalField[]; readonly tokenize: (text: string) => string[] }) {
    this.#fields = options.fields;
    this.#tokenize = options.tokenize;
    this.#lengths = options.fields.map(() => []);
    this.#totalLengths = options.fields.map(() => 0);
  }

  /** Number of indexed documents. */
  get size(): number {
    return this.#documents;
  }

  /** Indexes `fieldTexts` (one text per field, in the constructor's order) under `row`. */
  add(row: number, fieldTexts: readonly string[]): void {
    this.remove(row);
    const distinct = new Set<string>();
    this.#fields.forEach((_, field) => {
      const words = this.#tokenize(fieldTexts[field] ?? '');
      const frequencies = new Map<string, number>();
      for (const word of words) frequencies.set(word, (frequencies.get(word) ?? 0) + 1);
      for (const [term, frequency] of frequencies) {
        let postings = this.#terms.get(term);
        if (!postings) {
          postings = this.#fields.map(() => ({ rows: [], frequencies: [] }));
          this.#terms.set(term, postings);
          this.#sorted = undefined;
        }
        postings[field]?.rows.push(row);
        postings[field]?.frequencies.push(frequency);
        distinct.add(term);
      }
      (this.#lengths[field] as number[])[row] = words.length;
      this.#totalLengths[field] = (this.#totalLengths[field] ?? 0) + words.length;
    });
    this.#rowTerms[row] = [...distinct];
    this.#documents++;
  }

  /** Unindexes `row` (nothing happens for a free row). */
  remove(row: number): void {
    const terms = this.#rowTerms[row];
    if (!terms) return;
    for (const term of terms) {
      const postings = this.#terms.get(term) ?? [];
      for (const { rows, frequencies } of postings) {
        const position = rows.indexOf(row);
        if (position < 0) continue;
        // Order within a posting list carries no meaning: move the last entry into the gap.
        rows[position] = rows.at(-1) as number;
        frequencies[position] = frequencies.at(-1) as number;
        rows.pop();
        frequencies.pop();
      }
      if (postings.every(({ rows }) => rows.length === 0)) this.#terms.delete(term);
    }
    this.#fields.forEach((_, field) => {
      const lengths = this.#lengths[field] as number[];
      this.#totalLengths[field] = (this.#totalLengths[field] ?? 0) - (lengths[row] ?? 0);
      lengths[row] = 0;
    });
    this.#rowTerms[row] = undefined;
    this.#documents--;
  }

  /**
   * Scores every document that matches a word of `query` (or, for longer words, a word they
   * start). `hints` are extra words matched in the first field only (the name), at `hintWeight`.
   */
  search(query: string, hints?: { readonly words: string; readonly weight: number }): LexicalResult {
    const scores = new Float32Array(this.#rowTerms.length);
    const matchedWords = new Uint16Array(scores.length);
    const lastWord = new Int32Array(scores.length).fill(-1);
    const rows: number[] = [];
    const words = [...new Set(this.#tokenize(query))];
    const hintWords = hints ? [...new Set(this.#tokenize(hints.words))].filter((word) => !words.includes(word)) : [];
    [...words, ...hintWords].forEach((word, wordIndex) => {
      const isHint = wordIndex >= words.length;
      for (const [term, expansionWeight] of isHint ? ([[word, 1]] as [string, number][]) : this.#expand(word)) {
        const weight = isHint ? expansionWeight * (hints?.weight ?? 0) : expansionWeight;
        const postings = this.#terms.get(term) ?? [];
        this.#fields.forEach(({ boost }, field) => {
          if (isHint && field > 0) return;
          const list = postings[field];
          if (!list || list.rows.length === 0) return;
          const lengths = this.#lengths[field] as number[];
          const averageLength = (this.#totalLengths[field] ?? 0) / this.#documents || 1;
          const matching = list.rows.length;
          const idf = Math.log(1 + (this.#documents - matching + 0.5) / (matching + 0.5));
          const factor = weight * boost * idf;
          for (let position = 0; position < matching; position++) {
            const row = list.rows[position] as number;
            const frequency = list.frequencies[position] as number;
            const norm = k1 * (1 - b + (b * (lengths[row] ?? 0)) / averageLength);
            if (scores[row] === 0) rows.push(row);
            scores[row] = (scores[row] ?? 0) + factor * (delta + (frequency * (k1 + 1)) / (frequency + norm));
            if (lastWord[row] !== wordIndex && !isHint) {
              lastWord[row] = wordIndex;
              matchedWords[row] = (matchedWords[row] ?? 0) + 1;
            }
          }
        });
      }
    });
    let best = 0;
    for (const row of rows) {
      const score = (scores[row] ?? 0) * (matchedWords[row] ?? 1);
      scores[row] = score;
      if (score > best) best = score;
    }
    return { rows, scores, best };
  }

  /** `word` itself (weight 1) and, when long enough, the indexed terms it is a prefix of. */
  #expand(word: string): [string, number][] {
    const expansions: [string, number][] = [[word, 1]];
    if (word.length < minPrefixLength) return expansions;
    this.#sorted ??= [...this.#terms.keys()].sort();
    const sorted = this.#sorted;
    // Binary search for the first term not below `word`; its prefix matches follow it.
    let low = 0;
    let high = sorted.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((sorted[middle] as string) < word) low = middle + 1;
      else high = middle;
    }
    for (let position = low; position < sorted.length; position++) {
      const term = sorted[position] as string;
      if (!term.startsWith(word)) break;
      const extra = term.length - word.length;
      // Longer completions count for less: the weight falls as the completion grows.
      if (extra > 0) expansions.push([term, (prefixWeight * term.length) / (term.length + 0.3 * extra)]);
    }
    return expansions;
  }
}
