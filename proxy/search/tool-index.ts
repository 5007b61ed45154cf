import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { LRUCache } from 'lru-cache';
import type { SearchHit, SearchMode } from '../gateway/types';
import type { Embedder } from './embedder';
import { LexicalIndex } from './lexical-index';
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

/** A ranked tool as the index returns it; the gateway stamps its server's admission facts. */
export type RankedTool = Omit<SearchHit, 'server'> & { readonly server: string | undefined };

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

/** Options for {@link ToolIndex}. */
export interface ToolIndexOptions {
  /** Receives the one line saying the model failed and search is lexical-only from then on. */
  readonly log?: (line: string) => void;
}

/** A tool as the index holds it: with its index text and its row in the lexical and vector stores. */
type Entry = IndexedTool & { readonly text: string; readonly row: number };

/**
 * The hybrid tool index (SPEC §3.3): BM25 over each tool's index text plus cosine similarity of
 * MiniLM embeddings, fused into one score. The model loads in the background; until it is
 * ready, or if it never is, ranking is lexical and nothing else changes. A model that fails
 * after loading (an embedding or similarity call rejects) is dropped for good: the index says
 * so once and ranks lexically, and the search in progress is answered lexically too.
 */
export class ToolIndex {
  readonly #tools = new Map<string, Entry>();
  readonly #groups = new Map<string, string[]>();
  /** row → the tool it holds, `undefined` for a free row. Rows are shared by both stores. */
  readonly #rows: (Entry | undefined)[] = [];
  readonly #freeRows: number[] = [];
  readonly #vectors = new VectorStore();
  readonly #queryVectors = new LRUCache<string, Float32Array>({ max: 512 });
  /** Fields: the qualified name (boosted) and the whole index text. */
  readonly #lexical = new LexicalIndex({ fields: [{ boost: 2 }, { boost: 1 }], tokenize });
  /** Bumped on every change, so a search can tell the index moved while it awaited the model. */
  #version = 0;
  #embedder: Embedder | undefined;
  #mode: SearchMode;
  /** Background embedding work, in order. Never rejects: every link ends in {@link #fail}. */
  #pending: Promise<void> = Promise.resolve();
  /** Set once the model has failed, so a burst of faults logs one line. */
  #failed = false;
  readonly #log: ((line: string) => void) | undefined;

  /** `embedder` resolves when the model is loaded, or to `undefined` when it cannot be. */
  constructor(embedder?: Promise<Embedder | undefined>, options: ToolIndexOptions = {}) {
    this.#log = options.log;
    this.#mode = embedder ? 'loading' : 'lexical';
    if (embedder) {
      this.#pending = embedder.then(
        async (loaded) => {
          this.#embedder = loaded;
          if (!loaded) {
            this.#mode = 'lexical';
            return;
          }
          await this.#embedMissing();
          if (!this.#failed) this.#mode = 'hybrid';
        },
        (error: unknown) => this.#fail(error),
      );
    }
  }

  /** How search ranks right now. */
  get mode(): SearchMode {
    return this.#mode;
  }

  /** Number of indexed tools. */
  get size(): number {
    return this.#tools.size;
  }

  /** Resolves once the model has loaded (or failed to) and every indexed tool is embedded. */
  settled(): Promise<SearchMode> {
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
      const row = this.#freeRows.pop() ?? this.#rows.length;
      const entry = { ...tool, text: indexText(tool), row };
      this.#tools.set(tool.name, entry);
      this.#rows[row] = entry;
      this.#lexical.add(row, [tool.name, entry.text]);
    }
    this.#groups.set(
      server ?? '',
      tools.map((tool) => tool.name),
    );
    this.#version++;
    if (this.#embedder) this.#pending = this.#pending.then(() => this.#embedMissing());
  }

  /** Forgets every tool of `server`. */
  remove(server: string | undefined): void {
    for (const name of this.#groups.get(server ?? '') ?? []) {
      const entry = this.#tools.get(name);
      if (!entry) continue;
      this.#tools.delete(name);
      this.#rows[entry.row] = undefined;
      this.#freeRows.push(entry.row);
      this.#lexical.remove(entry.row);
      this.#vectors.delete(entry.row);
    }
    this.#groups.delete(server ?? '');
    this.#version++;
  }

  /**
   * The model failed (SPEC §3.3: lexical-only, nothing else changes): drop it for good, so no
   * later search or re-index touches it again, and say so once however many calls were in flight.
   */
  #fail(error: unknown): void {
    const model = this.#embedder?.model;
    this.#embedder = undefined;
    this.#mode = 'lexical';
    if (this.#failed) return;
    this.#failed = true;
    const reason = error instanceof Error ? error.message : String(error);
    const subject = model === undefined ? 'embedding model' : `embedding model ${model}`;
    this.#log?.(`${subject} failed (${reason}); tool search is lexical-only (BM25) from now on.`);
  }

  /** Embeds every tool without a vector yet; a failure drops the model instead of rejecting. */
  async #embedMissing(): Promise<void> {
    const embedder = this.#embedder;
    if (!embedder) return;
    const missing = [...this.#tools.values()].filter((tool) => !this.#vectors.has(tool.row));
    try {
      await this.#embed(embedder, missing);
    } catch (error) {
      this.#fail(error);
    }
  }

  async #embed(embedder: Embedder, missing: readonly Entry[]): Promise<void> {
    for (let start = 0; start < missing.length; start += embedBatchSize) {
      // A model that failed elsewhere meanwhile is not asked again.
      if (this.#failed) return;
      const batch = missing.slice(start, start + embedBatchSize);
      const vectors = await embedder.embed(batch.map((tool) => tool.text));
      batch.forEach((tool, index) => {
        const vector = vectors[index];
        // The tool may have been re-indexed while the batch ran; only keep current entries.
        if (vector && this.#rows[tool.row] === tool) this.#vectors.set(tool.row, vector);
      });
    }
  }

  /** The query's embedding, or `undefined` (rank lexically) when the model fails on it. */
  async #queryVector(embedder: Embedder, query: string): Promise<Float32Array | undefined> {
    const masked = maskIdentifiers(query) || query;
    const cached = this.#queryVectors.get(masked);
    if (cached) return cached;
    try {
      const [vector] = await embedder.embed([masked]);
      if (vector) this.#queryVectors.set(masked, vector);
      return vector;
    } catch (error) {
      this.#fail(error);
      return undefined;
    }
  }

  /**
   * Cosine similarity of `query` with the first `rowCount` rows: on the model's runtime when it
   * offers that, else in JavaScript. `undefined` (rank lexically) when the model fails on it.
   */
  async #cosines(embedder: Embedder, query: Float32Array, rowCount: number): Promise<Float32Array | undefined> {
    if (!embedder.similarities) return this.#vectors.dot(query, rowCount);
    try {
      return await embedder.similarities(this.#vectors.matrix(rowCount), query);
    } catch (error) {
      this.#fail(error);
      return undefined;
    }
  }

  /**
   * The best `limit` candidates for `query`, best first (all of them without a limit). A tool is
   * a candidate when BM25 matches it or its cosine similarity passes a small floor; the fused
   * score is a convex combination of the cosine and the BM25 score normalised to the best lexical
   * hit. Scores live in typed arrays indexed by row; only the best `limit` become hit objects.
   */
  async search(query: string, limit = Number.POSITIVE_INFINITY): Promise<RankedTool[]> {
    const embedder = this.#mode === 'hybrid' ? this.#embedder : undefined;
    // The query is embedded on the model's thread while BM25 runs here.
    const pendingVector = embedder ? this.#queryVector(embedder, query) : undefined;
    const version = this.#version;
    const lexical = this.#lexical.search(query);
    const rowCount = lexical.scores.length;
    const queryVector = await pendingVector;
    // Vectors keep arriving while tools are embedded in the background; rows embedded after
    // this point count as not embedded yet for this search.
    const embedded = this.#vectors.presence(rowCount);
    const cosines = embedder && queryVector ? await this.#cosines(embedder, queryVector, rowCount) : undefined;
    // Rows change hands when tools are re-indexed: if that happened while the model worked,
    // rank the index as it is now (the query's vector is cached by then).
    if (this.#version !== version) return this.search(query, limit);
    const bm25 = (row: number) => (lexical.best > 0 ? (lexical.scores[row] ?? 0) / lexical.best : 0);
    const scores = new Float64Array(rowCount);
    const similarities = new Float32Array(rowCount);
    const candidates: number[] = [];
    const add = (row: number, score: number, similarity: number) => {
      scores[row] = score;
      similarities[row] = similarity;
      candidates.push(row);
    };
    if (cosines) {
      const fuse = (row: number, similarity: number) => {
        const cosine = Math.max(0, similarity);
        add(row, semanticWeight * cosine + (1 - semanticWeight) * bm25(row), cosine);
      };
      // Candidates: every tool above the cosine floor, plus every lexical match below it.
      for (let row = 0; row < rowCount; row++) {
        const similarity = cosines[row] ?? 0;
        if (similarity >= minCosine && embedded[row] === 1 && this.#rows[row] !== undefined) fuse(row, similarity);
      }
      for (const row of lexical.rows) {
        if (this.#rows[row] === undefined) continue;
        // Tools indexed moments ago may not be embedded yet: rank them by BM25 alone meanwhile.
        if (embedded[row] !== 1) add(row, bm25(row), bm25(row));
        else if ((cosines[row] ?? 0) < minCosine) fuse(row, cosines[row] ?? 0);
      }
    } else {
      for (const row of lexical.rows) if (this.#rows[row] !== undefined) add(row, bm25(row), bm25(row));
    }
    // Only the best `limit` scores become objects: find the cut-off score on a typed copy.
    let cutoff = Number.NEGATIVE_INFINITY;
    if (limit < candidates.length) {
      const sorted = Float64Array.from(candidates, (row) => scores[row] ?? 0).sort();
      cutoff = sorted[sorted.length - limit] ?? cutoff;
    }
    const hits: RankedTool[] = [];
    for (const row of candidates) {
      const tool = (scores[row] ?? 0) >= cutoff ? this.#rows[row] : undefined;
      if (!tool) continue;
      const { name, server, toolName, description, inputSchema } = tool;
      hits.push({
        name,
        toolName,
        server,
        description,
        inputSchema,
        score: scores[row] ?? 0,
        similarity: similarities[row] ?? 0,
      });
    }
    hits.sort((a, b) => b.score - a.score || (a.name < b.name ? -1 : 1));
    return hits.length > limit ? hits.slice(0, limit) : hits;
  }
}
