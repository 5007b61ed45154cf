import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { LRUCache } from 'lru-cache';
import MiniSearch from 'minisearch';
import type { Embedder } from './embedder';
import type { SearchHit } from './pipeline';

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

/** Reciprocal-rank-fusion constant (Cormack et al.); 60 is the customary value. */
const rrfK = 60;
/** Below this cosine a tool is no semantic candidate, so nonsense queries find nothing. */
const minCosine = 0.1;
const embedBatchSize = 32;
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

function cosine(a: Float32Array, b: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += (a[i] ?? 0) * (b[i] ?? 0);
  return sum;
}

/**
 * The hybrid tool index (SPEC §3.3): BM25 (MiniSearch) over each tool's index text plus cosine
 * similarity of MiniLM embeddings, fused by reciprocal rank. The model loads in the background;
 * until it is ready, or if it never is, ranking is lexical and nothing else changes.
 */
export class ToolIndex {
  readonly #tools = new Map<string, IndexedTool & { readonly text: string }>();
  readonly #groups = new Map<string, string[]>();
  readonly #vectors = new Map<string, Float32Array>();
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
    const cached = this.#queryVectors.get(query);
    if (cached) return cached;
    const [vector] = await embedder.embed([query]);
    if (vector) this.#queryVectors.set(query, vector);
    return vector;
  }

  /**
   * Ranks every candidate for `query`, best first. The caller runs the search pipeline over the
   * whole list and only then cuts it to top-k, so filters never let a hidden tool take a slot.
   */
  async search(query: string): Promise<SearchHit[]> {
    const fused = new Map<string, { rrf: number; lexical: number; cosine: number | undefined }>();
    const lexical = this.#lexical.search(query);
    const topLexical = lexical[0]?.score ?? 1;
    lexical.forEach((result, rank) => {
      fused.set(result.id, { rrf: 1 / (rrfK + rank + 1), lexical: result.score / topLexical, cosine: undefined });
    });
    const embedder = this.#mode === 'hybrid' ? this.#embedder : undefined;
    const queryVector = embedder ? await this.#queryVector(embedder, query) : undefined;
    if (queryVector) {
      const similarities: [string, number][] = [];
      for (const [name, vector] of this.#vectors) similarities.push([name, cosine(queryVector, vector)]);
      similarities.sort((a, b) => b[1] - a[1]);
      similarities.forEach(([name, similarity], rank) => {
        const entry = fused.get(name);
        if (entry) entry.cosine = similarity;
        if (similarity < minCosine) return;
        const contribution = 1 / (rrfK + rank + 1);
        if (entry) entry.rrf += contribution;
        else fused.set(name, { rrf: contribution, lexical: 0, cosine: similarity });
      });
    }
    const best = (queryVector ? 2 : 1) / (rrfK + 1);
    const hits: SearchHit[] = [];
    for (const [name, entry] of fused) {
      const tool = this.#tools.get(name);
      if (!tool) continue;
      hits.push({
        name,
        server: tool.server,
        description: tool.description,
        inputSchema: tool.inputSchema,
        score: entry.rrf / best,
        similarity: queryVector ? Math.max(0, entry.cosine ?? 0) : entry.lexical,
      });
    }
    return hits.sort((a, b) => b.score - a.score || a.name.localeCompare(b.name));
  }
}
