import { describe, expect, it } from 'vitest';
import { bm25Parameters, LexicalIndex } from './lexical-index';

// Oracle test (issue 17): on random corpora, every score of the hand-written, typed-array BM25+
// equals a naive reference written here from the formula, with the same constants:
//   idf(t, f)   = ln(1 + (N - n_f(t) + 0.5) / (n_f(t) + 0.5))
//   term(t,d,f) = boost_f * w(q, t) * idf(t, f) * (delta + tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d_f| / avgdl_f)))
//   score(d)    = (sum over distinct query words q, fields f, terms t of d_f matching q) * (distinct q matched)
// where t matches q exactly (w = 1) or, for |q| >= minPrefixLength, t starts with q (w = the
// length-discounted prefix weight). N counts live documents only, after random removals.
const { k1, b, delta, minPrefixLength, prefixWeight } = bm25Parameters;

/** mulberry32: a small seeded generator, so a failure names a reproducible corpus. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const words = (text: string) => text.split(' ').filter((word) => word.length > 0);

function referenceScores(
  documents: Map<number, string[]>,
  boosts: readonly number[],
  query: string,
): Map<number, number> {
  const live = [...documents.entries()];
  const count = live.length;
  const averages = boosts.map(
    (_, field) => live.reduce((sum, [, fields]) => sum + words(fields[field] ?? '').length, 0) / count || 1,
  );
  const weightOf = (queryWord: string, term: string) => {
    if (term === queryWord) return 1;
    if (queryWord.length < minPrefixLength || !term.startsWith(queryWord)) return 0;
    const extra = term.length - queryWord.length;
    return (prefixWeight * term.length) / (term.length + 0.3 * extra);
  };
  const scores = new Map<number, number>();
  for (const [row, fields] of live) {
    let sum = 0;
    let matched = 0;
    for (const queryWord of new Set(words(query))) {
      let matchedThisWord = false;
      boosts.forEach((boost, field) => {
        const documentWords = words(fields[field] ?? '');
        for (const term of new Set(documentWords)) {
          const weight = weightOf(queryWord, term);
          if (weight === 0) continue;
          matchedThisWord = true;
          const containing = live.filter(([, other]) => words(other[field] ?? '').includes(term)).length;
          const idf = Math.log(1 + (count - containing + 0.5) / (containing + 0.5));
          const frequency = documentWords.filter((word) => word === term).length;
          const norm = k1 * (1 - b + (b * documentWords.length) / (averages[field] ?? 1));
          sum += boost * weight * idf * (delta + (frequency * (k1 + 1)) / (frequency + norm));
        }
      });
      if (matchedThisWord) matched++;
    }
    if (matched > 0) scores.set(row, sum * matched);
  }
  return scores;
}

describe('LexicalIndex against a naive BM25+ reference', () => {
  // Short stems and their longer forms, so prefix expansion is exercised in both directions.
  const vocabulary =
    'list listing lists file files filter read reader send sender email mail repo repository issue issues create created pull request merge time zone a b cd'.split(
      ' ',
    );

  it.each([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])('random corpus %i: every score matches', (seed) => {
    const next = random(seed);
    const pick = () => vocabulary[Math.floor(next() * vocabulary.length)] as string;
    const text = (maximum: number) => Array.from({ length: 1 + Math.floor(next() * maximum) }, pick).join(' ');
    const boosts = [1 + Math.floor(next() * 3), 1];
    const index = new LexicalIndex({ fields: boosts.map((boost) => ({ boost })), tokenize: words });
    const documents = new Map<number, string[]>();
    const rowCount = 5 + Math.floor(next() * 40);
    for (let row = 0; row < rowCount; row++) {
      const fields = [text(3), text(25)];
      documents.set(row, fields);
      index.add(row, fields);
    }
    // Random removals and re-adds exercise the posting lists' maintenance.
    for (let change = 0; change < rowCount / 2; change++) {
      const row = Math.floor(next() * rowCount);
      if (next() < 0.5) {
        index.remove(row);
        documents.delete(row);
      } else {
        const fields = [text(3), text(25)];
        documents.set(row, fields);
        index.add(row, fields);
      }
    }
    expect(index.size).toBe(documents.size);
    for (let queryNumber = 0; queryNumber < 15; queryNumber++) {
      const query = text(4);
      const expected = referenceScores(documents, boosts, query);
      const { rows, scores, best } = index.search(query);
      expect(new Set(rows), `seed ${seed}, query "${query}"`).toEqual(new Set(expected.keys()));
      for (const [row, score] of expected) {
        // The index accumulates in float32: compare to a relative tolerance.
        expect(scores[row], `seed ${seed}, query "${query}", row ${row}`).toBeCloseTo(
          score,
          4 - Math.ceil(Math.log10(Math.max(1, score))),
        );
      }
      expect(best).toBeCloseTo(Math.max(0, ...expected.values()), 2);
    }
  });
});
