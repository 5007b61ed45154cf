import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { LRUCache } from 'lru-cache';
import MiniSearch from 'minisearch';
import type { Embedder } from './embedder';
import type { SearchHit } from './pipeline';
import { VectorStore } from './vector-store';

/** A tool as the index holds it. */
export interface IndexedTool {
  /** Qualified name: `{server}__{tool}`, or the bare name of a local tool. */
  readonly name: string;
  /** The downstream server, or `undefined` for a local tool. */
  readonly server: string | undefined;
  /** The tool's own name on its server. */
  readonly toolName: string;
  readonly description: string;
  readonly inputSchema: Tool['inputSchema'];
}

/** How search currently ranks: lexical while the model loads or when it is unavailable. */
export type IndexMode = 'loading' | 'hybrid' | 'lexical';

/** Weight of the cosine similarity in the fused score; BM25 (normalised to the best hit) gets the rest. */
const semanticWeight = 0.8;
/** Below this cosine a tool is no semantic candidate, so nonsense queries find nothing. */
const minCosine = 0.1;
/** One text per inference: on CPU, padding a batch to its longest text costs more than batching saves (measured). */
const embedBatchSize = 1;
const stopWords = new Set(
  'a an and are as at be by can do for from how i in into is it me my of on or please some that the this to use using want with you your'.split(
    ' ',
  ),
);

/** Splits snake_case, kebab-case, camelCase and `server__tool` into lowercase words. */
export function tokenize(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((word) => word.length > 1 && !stopWords.has(word));
}

/**
 * Replaces literal identifiers in a query (URLs, e-mail addresses, file paths, `owner/repo`
 * slugs, `#123` numbers) with the kind of thing they are. The embedding then sees the intent
 * ("read this URL") instead of the tokens of one particular address, which otherwise pull the
 * query towards unrelated tools that share a word. BM25 still sees the raw query.
 */
export function maskIdentifiers(query: string): string {
  return query
    .replace(/\bhttps?:\/\/\S+/gi, ' URL ')
    .replace(/[\w.+-]+@[\w-]+\.[\w.]+/g, ' email address ')
    .replace(
      /(?<=^|\s)(?:~|\.{1,2})?\/[\w./-]+|\b[\w-]+\.(?:py|js|ts|json|ya?ml|md|txt|log|csv|html|go|rs)\b/gi,
      ' file path ',
    )
    .replace(/\b[\w.-]+\/[\w.-]+\b/g, ' repository ')
    .replace(/#\d+/g, ' number ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** `"<qualified name>: <description>. Parameters: p (type, required|optional), …"` (SPEC §3.3). */
export function indexText(tool: IndexedTool): string {
  const properties = (tool.inputSchema.properties ?? {}) as Record<string, { type?: unknown }>;
  const required = new Set(tool.inputSchema.required ?? []);
  const parameters = Object.entries(properties).map(([name, schema]) => {
    const type = typeof schema?.type === 'string' ? schema.type : 'any';
    return `${name} (${type}, ${required.has(name) ? 'required' : 'optional'})`;
  });
  const description = tool.description.trim().replace(/\.$/, '');
  return `${tool.name}: ${description}.${parameters.length > 0 ? ` Parameters: ${parameters.join(', ')}` : ''}`;
}

/** Dot product of two unit vectors of the same length (the hot loop of semantic search). */
/**
 * The hybrid tool index (SPEC §3.3): BM25 (MiniSearch) over each tool's index text plus cosine
 * similarity of MiniLM embeddings, fused by reciprocal rank. The model loads in the background;
 * until it is ready, or if it never is, ranking is lexical and nothing else changes.
 */
export class ToolIndex {
  readonly #tools = new Map<string, IndexedTool & { readonly text: string }>();
  readonly #groups = new Map<string, string[]>();
  readonly #vectors = new VectorStore();
  readonly #queryVectors = new LRUCache<string, Float32Array>({ max: 512 });
  readonly #lexical = new MiniSearch<{ id: string; name: string; text: string }>({
    fields: ['name', 'text'],
    tokenize,
    processTerm: (term) => term,
    searchOptions: { boost: { name: 2 }, prefix: (term) => term.length >= 4, combineWith: 'OR' },
  });
  #embedder: Embedder | undefined;
  #mode: IndexMode;
  #pending: Promise<void> = Promise.resolve();

  /** `embedder` resolves when the model is loaded, or to `undefined` when it cannot be. */
  constructor(embedder?: Promise<Embedder | undefined>) {
    this.#mode = embedder ? 'loading' : 'lexical';
    if (embedder) {
      this.#pending = embedder.then((loaded) => {
        this.#embedder = loaded;
        if (!loaded) {
          this.#mode = 'lexical';
          return;
        }
        return this.#embedMissing().then(() => {
          this.#mode = 'hybrid';
        });
      });
    }
  }

  /** How search ranks right now. */
  get mode(): IndexMode {
    return this.#mode;
  }

  /** Number of indexed tools. */
  get size(): number {
    return this.#tools.size;
  }

  /** Resolves once the model has loaded (or failed to) and every indexed tool is embedded. */
  settled(): Promise<IndexMode> {
    return this.#pending.then(() => this.#mode);
  }

  /** Looks a tool up by qualified name. */
  get(name: string): IndexedTool | undefined {
    return this.#tools.get(name);
  }

  /** Every tool of a server (or the local tools when `server` is `undefined`). */
  toolsOf(server: string | undefined): IndexedTool[] {
    return (this.#groups.get(server ?? '') ?? []).flatMap((name) => this.#tools.get(name) ?? []);
  }

  /** Replaces everything indexed for `server` (or the local tools) with `tools`. */
  replace(server: string | undefined, tools: readonly IndexedTool[]): void {
    this.remove(server);
    for (const tool of tools) {
      const entry = { ...tool, text: indexText(tool) };
      this.#tools.set(tool.name, entry);
      this.#lexical.add({ id: tool.name, name: tool.name, text: entry.text });
    }
    this.#groups.set(
      server ?? '',
      tools.map((tool) => tool.name),
    );
    if (this.#embedder) this.#pending = this.#pending.then(() => this.#embedMissing());
  }

  /** Forgets every tool of `server`. */
  remove(server: string | undefined): void {
    for (const name of this.#groups.get(server ?? '') ?? []) {
      if (this.#tools.delete(name)) this.#lexical.discard(name);
      this.#vectors.delete(name);
    }
    this.#groups.delete(server ?? '');
  }

  async #embedMissing(): Promise<void> {
    const embedder = this.#embedder;
    if (!embedder) return;
    const missing = [...this.#tools.values()].filter((tool) => !this.#vectors.has(tool.name));
    await this.#embed(embedder, missing);
  }

  async #embed(embedder: Embedder, missing: readonly (IndexedTool & { readonly text: string })[]): Promise<void> {
    for (let start = 0; start < missing.length; start += embedBatchSize) {
      const batch = missing.slice(start, start + embedBatchSize);
      const vectors = await embedder.embed(batch.map((tool) => tool.text));
      batch.forEach((tool, index) => {
        const vector = vectors[index];
        // The tool may have been re-indexed while the batch ran; only keep current entries.
        if (vector && this.#tools.get(tool.name)?.text === tool.text) this.#vectors.set(tool.name, vector);
      });
    }
  }

  async #queryVector(embedder: Embedder, query: string): Promise<Float32Array | undefined> {
    const masked = maskIdentifiers(query) || query;
    const cached = this.#queryVectors.get(masked);
    if (cached) return cached;
    const [vector] = await embedder.embed([masked]);
    if (vector) this.#queryVectors.set(masked, vector);
    return vector;
  }

  /**
   * The best `limit` candidates for `query`, best first (all of them without a limit). A tool is
   * a candidate when BM25 matches it or its cosine similarity passes a small floor; the fused
   * score is a convex combination of the cosine and the BM25 score normalised to the best lexical
   * hit. Scores are computed for every candidate and only the best `limit` become hit objects.
   */
  async search(query: string, limit = Number.POSITIVE_INFINITY): Promise<SearchHit[]> {
    const embedder = this.#mode === 'hybrid' ? this.#embedder : undefined;
    // The query is embedded on the model's thread while BM25 runs here.
    const pendingVector = embedder ? this.#queryVector(embedder, query) : undefined;
    const lexical = new Map<string, number>();
    const results = this.#lexical.search(query);
    const topLexical = results[0]?.score ?? 1;
    for (const result of results) lexical.set(result.id, result.score / topLexical);
    const queryVector = await pendingVector;
    const names: string[] = [];
    const scores: number[] = [];
    const similarities: number[] = [];
    const add = (name: string, score: number, similarity: number) => {
      names.push(name);
      scores.push(score);
      similarities.push(similarity);
    };
    if (queryVector) {
      const cosines = embedder?.similarities
        ? await embedder.similarities(this.#vectors.matrix(), queryVector)
        : this.#vectors.dot(queryVector);
      const fuse = (name: string, similarity: number) => {
        const cosine = Math.max(0, similarity);
        add(name, semanticWeight * cosine + (1 - semanticWeight) * (lexical.get(name) ?? 0), cosine);
      };
      // Candidates: every tool above the cosine floor, plus every lexical match below it.
      for (let row = 0; row < cosines.length; row++) {
        const similarity = cosines[row] ?? 0;
        const name = this.#vectors.nameAt(row);
        if (name !== undefined && similarity >= minCosine) fuse(name, similarity);
      }
      for (const [name, bm25] of lexical) {
        const row = this.#vectors.rowOf(name);
        const similarity = row === undefined ? undefined : cosines[row];
        if (similarity !== undefined && similarity < minCosine) fuse(name, similarity);
        // Tools indexed moments ago may not be embedded yet: rank them by BM25 alone meanwhile.
        if (row === undefined) add(name, bm25, bm25);
      }
    } else {
      for (const [name, bm25] of lexical) add(name, bm25, bm25);
    }
    // Only the best `limit` scores become objects: find the cut-off score on a typed copy.
    let cutoff = Number.NEGATIVE_INFINITY;
    if (limit < scores.length) {
      const sorted = Float64Array.from(scores).sort();
      cutoff = sorted[sorted.length - limit] ?? cutoff;
    }
    const hits: SearchHit[] = [];
    scores.forEach((score, position) => {
      const tool = score >= cutoff ? this.#tools.get(names[position] ?? '') : undefined;
      if (!tool) return;
      const { name, server, description, inputSchema } = tool;
      hits.push({ name, server, description, inputSchema, score, similarity: similarities[position] ?? 0 });
    });
    hits.sort((a, b) => b.score - a.score || (a.name < b.name ? -1 : 1));
    return hits.length > limit ? hits.slice(0, limit) : hits;
  }
}
