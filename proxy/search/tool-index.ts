import type { Tool } from '@modelcontextprotocol/server';
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

/**
 * The ranking's constants in one place. Each was chosen on the original fixture and the tuning
 * half of the unseen set only, never on the held-out half (issue 17; the list with the set each
 * was chosen on is in `tests/fixtures/README.md`). The index takes overrides for evaluation.
 */
export interface RankingOptions {
  /** Weight of the cosine similarity in the fused score; BM25 (normalised to the best hit) gets the rest. */
  readonly semanticWeight: number;
  /** Below this cosine a tool is no semantic candidate, so nonsense queries find nothing. */
  readonly minCosine: number;
  /** BM25 field weights: the qualified name, the index text, the parameters' names and descriptions. */
  readonly nameBoost: number;
  readonly textBoost: number;
  readonly parameterBoost: number;
  /** What is embedded: the SPEC §3.3 index text, or {@link embeddingText} (name in words, description without docstring sections). */
  readonly embedding: 'index-text' | 'clean';
  /**
   * Extra vectors per tool, one per description sentence (at most this many; 0: none). A tool's
   * cosine is the best of its vectors, so one sentence that says what the query asks is enough.
   */
  readonly sentenceVectors: number;
  /**
   * Adds the action verbs tools are named with (`list`, `get`, `create`, `update`, `delete`,
   * `search`) to the BM25 query when the query asks for that action in other words ("what
   * fields…" → get, "get rid of…" → delete), so tools of one server are told apart by action.
   */
  readonly intentWords: boolean;
  /** Weight of those verbs, matched in the name field only (0: added to the query as plain words). */
  readonly intentWeight: number;
}

/** The defaults of {@link RankingOptions}. */
export const rankingDefaults: RankingOptions = {
  semanticWeight: 0.8,
  minCosine: 0.1,
  nameBoost: 2,
  textBoost: 1,
  parameterBoost: 1,
  embedding: 'clean',
  sentenceVectors: 0,
  intentWords: true,
  intentWeight: 3,
};

/** Everyday phrasings of the actions tools are named after, and the names' verbs they map to. */
const intentPhrases: readonly [RegExp, string][] = [
  [/\b(?:show|what(?:'s| is| are)?|which|who|how many|details?|inspect|look up|tell me)\b/i, 'get list describe'],
  [/\b(?:add|make|new|spin up|start|open|file|log|set up|register|insert|upload|write)\b/i, 'create add'],
  [
    /\b(?:change|fix|set|rename|move|bump|edit|modify|relabel|mark|roll|lower|raise|increase|decrease|adjust)\b/i,
    'update',
  ],
  [
    /\b(?:remove|get rid of|drop|delete|forget|erase|destroy|clean up|purge|shut (?:it )?down|stop)\b/i,
    'delete remove close',
  ],
  [/\b(?:find|look for|search|lookup|query|filter|match(?:ing)?|containing|mention(?:s|ing)?)\b/i, 'search find'],
  [/\b(?:all|every|each)\b/i, 'list'],
];

/** The action verbs a query asks for in other words (see {@link RankingOptions.intentWords}). */
export function intentWords(query: string): string {
  return intentPhrases
    .filter(([pattern]) => pattern.test(query))
    .map(([, words]) => words)
    .join(' ');
}
/**
 * Tool texts per request to the model. The model sorts each request by length and batches it;
 * requests this large let it do so, and the index checks between them whether the model failed.
 */
const embedRequestSize = 512;
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

/** Folders that start a relative path far more often than they name a repository owner. */
const pathFolders = new Set(
  'src lib app apps docs doc test tests spec config configs scripts bin pkg cmd internal public assets data tmp var etc home usr packages'.split(
    ' ',
  ),
);
const fileExtension =
  /\.(?:py|js|mjs|cjs|ts|tsx|jsx|json|ya?ml|toml|md|txt|log|csv|html|css|go|rs|java|rb|sh|sql|xml|pdf|png|jpe?g)$/i;

/** What a whitespace-delimited literal in a query is, or `undefined` for an ordinary word. */
function identifierKind(token: string): string | undefined {
  if (/^https?:\/\/\S+$/i.test(token)) return 'URL';
  if (/^[\w.+-]+@[\w-]+\.[\w.]+$/.test(token)) return 'email address';
  if (/^#\d+$/.test(token)) return 'number';
  // Absolute, home-relative and dot-relative paths, and anything with two or more slashes
  // (`reports/2024/q3`, `src/lib/index.ts`) are paths, never repositories.
  if (/^(?:~|\.{1,2})?\//.test(token) || /^[\w.-]+(?:\/[\w.-]+){2,}\/?$/.test(token)) return 'file path';
  const slug = /^([\w.-]+)\/([\w.-]+)$/.exec(token);
  if (slug) {
    const [, owner = '', name = ''] = slug;
    // `src/index.ts` is a path; `vercel/next.js` and `acme/web` are repositories.
    if (pathFolders.has(owner.toLowerCase()) || /^\d+$/.test(owner) || /^\d+$/.test(name)) return 'file path';
    return 'repository';
  }
  if (fileExtension.test(token) && /^[\w.-]+$/.test(token)) return 'file path';
  return undefined;
}

/**
 * Replaces literal identifiers in a query (URLs, e-mail addresses, file paths, `owner/repo`
 * slugs, `#123` numbers) with the kind of thing they are. The embedding then sees the intent
 * ("read this URL") instead of the tokens of one particular address, which otherwise pull the
 * query towards unrelated tools that share a word. BM25 still sees the raw query. Each
 * whitespace-delimited token is judged whole (trailing punctuation aside), so `vercel/next.js`
 * is a repository rather than a path and `reports/2024/q3` a path rather than a repository.
 */
export function maskIdentifiers(query: string): string {
  return query
    .split(/\s+/)
    .map((word) => {
      const [, lead = '', token = '', trail = ''] = /^([("'`]*)(.*?)([)"'`,;:!?.]*)$/.exec(word) ?? [];
      const kind = identifierKind(token);
      return kind === undefined ? word : `${lead}${kind}${trail}`;
    })
    .join(' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** A tool's name as words: `github__create_pull_request` → `github create pull request`. */
function nameWords(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/[_\-.]+/g, ' ')
    .trim()
    .toLowerCase();
}

/** Docstring sections that describe arguments and results, not what the tool is for. */
const docstringSections =
  /(?:^|\s)(?:Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Example usage):(?:\s|$)/;

/**
 * The text a tool is embedded from (issue 17): its qualified name split into words, then its
 * description without docstring `Args:`/`Returns:`/`Raises:` sections. The parameter list is
 * left to BM25: on a small encoder it dilutes what the tool does with what it takes.
 */
export function embeddingText(tool: IndexedTool): string {
  const description = tool.description.trim();
  const section = docstringSections.exec(description);
  const cut = section && section.index >= 20 ? description.slice(0, section.index) : description;
  return `${nameWords(tool.name)}: ${cut.trim().replace(/\s+/g, ' ')}`;
}

/**
 * The description's sentences, each after the name in words, for the per-sentence vectors.
 * Only descriptions of two or more sentences have any (one sentence is the main vector already).
 */
export function sentenceTexts(tool: IndexedTool, limit: number): string[] {
  if (limit <= 0) return [];
  const main = embeddingText(tool);
  const colon = main.indexOf(': ');
  const name = main.slice(0, colon);
  const sentences = main
    .slice(colon + 2)
    .split(/(?<=[.!?])\s+(?=[A-Z`"'(])/)
    .map((sentence) => sentence.trim())
    .filter((sentence) => sentence.split(' ').length >= 3);
  return sentences.length < 2 ? [] : sentences.slice(0, limit).map((sentence) => `${name}: ${sentence}`);
}

/** The parameters' names and descriptions, for the BM25 parameter field. */
export function parameterText(tool: IndexedTool): string {
  const properties = (tool.inputSchema.properties ?? {}) as Record<string, { description?: unknown }>;
  return Object.entries(properties)
    .map(([name, schema]) => `${name} ${typeof schema?.description === 'string' ? schema.description : ''}`)
    .join('. ');
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
  /** Overrides of {@link rankingDefaults} (for evaluations; the proxy runs the defaults). */
  readonly ranking?: Partial<RankingOptions>;
}

/** A tool as the index holds it: with its index and embedding texts and its row in the lexical and vector stores. */
type Entry = IndexedTool & {
  readonly text: string;
  readonly embedded: string;
  readonly row: number;
  /** Per-sentence texts and their rows in the sentence store. */
  readonly sentences: readonly string[];
  readonly sentenceRows: readonly number[];
};

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
  /** Per-sentence vectors, in a row space of their own; `#sentenceOwners[row]` is the tool's row. */
  readonly #sentenceVectors = new VectorStore();
  readonly #sentenceOwners: (number | undefined)[] = [];
  readonly #freeSentenceRows: number[] = [];
  readonly #queryVectors = new LRUCache<string, Float32Array>({ max: 512 });
  readonly #ranking: RankingOptions;
  /** Fields: the qualified name, the whole index text, the parameters' names and descriptions. */
  readonly #lexical: LexicalIndex;
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
    this.#ranking = { ...rankingDefaults, ...options.ranking };
    const { nameBoost, textBoost, parameterBoost } = this.#ranking;
    this.#lexical = new LexicalIndex({
      fields: [{ boost: nameBoost }, { boost: textBoost }, { boost: parameterBoost }],
      tokenize,
    });
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
      const text = indexText(tool);
      const embedded = this.#ranking.embedding === 'clean' ? embeddingText(tool) : text;
      const sentences = sentenceTexts(tool, this.#ranking.sentenceVectors);
      const sentenceRows = sentences.map(() => this.#freeSentenceRows.pop() ?? this.#sentenceOwners.length);
      for (const sentenceRow of sentenceRows) this.#sentenceOwners[sentenceRow] = row;
      const entry = { ...tool, text, embedded, row, sentences, sentenceRows };
      this.#tools.set(tool.name, entry);
      this.#rows[row] = entry;
      this.#lexical.add(row, [tool.name, text, this.#ranking.parameterBoost > 0 ? parameterText(tool) : '']);
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
      for (const sentenceRow of entry.sentenceRows) {
        this.#sentenceOwners[sentenceRow] = undefined;
        this.#sentenceVectors.delete(sentenceRow);
        this.#freeSentenceRows.push(sentenceRow);
      }
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
    const embedDocuments = embedder.embedDocuments?.bind(embedder) ?? embedder.embed.bind(embedder);
    for (let start = 0; start < missing.length; start += embedRequestSize) {
      // A model that failed elsewhere meanwhile is not asked again.
      if (this.#failed) return;
      const batch = missing.slice(start, start + embedRequestSize);
      const vectors = await embedDocuments(batch.flatMap((tool) => [tool.embedded, ...tool.sentences]));
      let position = 0;
      for (const tool of batch) {
        const vector = vectors[position];
        const sentenceVectors = vectors.slice(position + 1, position + 1 + tool.sentences.length);
        position += 1 + tool.sentences.length;
        // The tool may have been re-indexed while the batch ran; only keep current entries.
        if (!vector || this.#rows[tool.row] !== tool) continue;
        // Sentences first: a tool counts as embedded once its main vector is there.
        tool.sentenceRows.forEach((sentenceRow, index) => {
          const sentenceVector = sentenceVectors[index];
          if (sentenceVector) this.#sentenceVectors.set(sentenceRow, sentenceVector);
        });
        this.#vectors.set(tool.row, vector);
      }
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
  async #cosines(
    embedder: Embedder,
    query: Float32Array,
    rowCount: number,
    store: VectorStore = this.#vectors,
  ): Promise<Float32Array | undefined> {
    if (rowCount === 0 || store.width === 0) return new Float32Array(rowCount);
    if (!embedder.similarities) return store.dot(query, rowCount);
    try {
      return await embedder.similarities(store.matrix(rowCount), query);
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
    const { intentWords: useIntents, intentWeight } = this.#ranking;
    const intents = useIntents ? intentWords(query) : '';
    const lexical =
      intents === ''
        ? this.#lexical.search(query)
        : intentWeight > 0
          ? this.#lexical.search(query, { words: intents, weight: intentWeight })
          : this.#lexical.search(`${query} ${intents}`);
    const rowCount = lexical.scores.length;
    const queryVector = await pendingVector;
    // Vectors keep arriving while tools are embedded in the background; rows embedded after
    // this point count as not embedded yet for this search.
    const embedded = this.#vectors.presence(rowCount);
    const cosines = embedder && queryVector ? await this.#cosines(embedder, queryVector, rowCount) : undefined;
    // A tool's cosine is the best of its main vector and its sentences' vectors.
    const sentenceCount = this.#sentenceOwners.length;
    const sentencePresence = this.#sentenceVectors.presence(sentenceCount);
    const sentenceCosines =
      cosines && queryVector && embedder && this.#sentenceVectors.size > 0
        ? await this.#cosines(embedder, queryVector, sentenceCount, this.#sentenceVectors)
        : undefined;
    // Rows change hands when tools are re-indexed: if that happened while the model worked,
    // rank the index as it is now (the query's vector is cached by then).
    if (this.#version !== version) return this.search(query, limit);
    if (cosines && sentenceCosines) {
      for (let sentenceRow = 0; sentenceRow < sentenceCount; sentenceRow++) {
        const owner = this.#sentenceOwners[sentenceRow];
        if (owner === undefined || owner >= rowCount || sentencePresence[sentenceRow] !== 1) continue;
        const similarity = sentenceCosines[sentenceRow] ?? 0;
        if (similarity > (cosines[owner] ?? 0)) cosines[owner] = similarity;
      }
    }
    const { semanticWeight, minCosine } = this.#ranking;
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
