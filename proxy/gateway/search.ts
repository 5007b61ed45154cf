import type { Tool } from '@modelcontextprotocol/server';
import { qualifyName, toolNameProblem } from '../names';
import { type Embedder, loadEmbedder, type SearchModel } from '../search/embedder';
import { type IndexedTool, ToolIndex } from '../search/tool-index';
import type { LocalTool } from './create-gateway';
import { mintHandle, scopeKey } from './discovery-scope';
import type { DiscoveryStore } from './discovery-store';
import { type PipelineReporter, runSearchPipeline } from './run-pipelines';
import type { CallContext, SearchFilter, SearchMode, SearchResult, ServerFacts } from './types';

/** How the tool index gets its embedding model. */
export type EmbeddingOptions =
  | false
  | {
      readonly modelDir?: string;
      readonly allowRemote: boolean;
      /** `search.model` (default `minilm`). */
      readonly model?: SearchModel;
      /** Folder of the persistent vector cache; none when absent. */
      readonly cacheDir?: string;
    }
  | { readonly embedder: Promise<Embedder | undefined> };

/** What search asks of the registry. */
export interface SearchServers {
  /** What the gateway vouches for about a connected server. */
  facts(name: string): ServerFacts | undefined;
  /** The names still being admitted. */
  connecting(): readonly string[];
  /** Waits for the configured servers to connect, at most the start grace period. */
  startGrace(): Promise<void>;
}

/** Options of {@link createSearch}. */
export interface SearchOptions {
  readonly localTools: readonly LocalTool[];
  readonly servers: SearchServers;
  readonly store: DiscoveryStore;
  readonly reporter: PipelineReporter;
  /** The search pipeline as configured now (a reload replaces it). */
  readonly filters: () => readonly SearchFilter[];
  readonly log: (line: string) => void;
  /** Default: the staged model if present, else lexical-only with one log line. */
  readonly embeddings?: EmbeddingOptions;
}

/** What stamping reads about an indexed tool. */
export interface FoundTool {
  /** The server it belongs to; `undefined` for a local tool. */
  readonly server: string | undefined;
  readonly toolName: string;
  readonly inputSchema: Tool['inputSchema'];
  readonly hasOutputSchema: boolean;
}

/** The tool index and the discoveries that searches record. */
export interface Search {
  /** How search ranks right now. */
  readonly mode: SearchMode;
  /** Resolves once the model has loaded (or failed to) and every indexed tool is embedded. */
  ready(): Promise<SearchMode>;
  /** Ranks, filters and cuts; every returned tool becomes discovered in `context.scope`. */
  search(request: { readonly query: string; readonly topK?: number }, context: CallContext): Promise<SearchResult>;
  /** The indexed tool by qualified name. */
  find(tool: string): FoundTool | undefined;
  /** Indexes what `server` lists now, in place of what it listed before. */
  list(server: string, tools: readonly Tool[]): void;
  remove(server: string): void;
  /** How many of `server`'s tools are indexed. */
  count(server: string): number;
  /** Releases the embedding model if the gateway loaded it. */
  close(): Promise<void>;
}

const defaultTopK = 5;
const maxTopK = 50;
/** How many ranked candidates the search filters see first (the window widens when they hide many). */
const searchWindow = 200;

/** Clamps `top_k` to 1..50: a non-positive or absurd value never returns the whole index. */
export function clampTopK(value: number | undefined): number {
  if (value === undefined || Number.isNaN(value)) return defaultTopK;
  return Math.min(maxTopK, Math.max(1, Math.trunc(value)));
}

function embedderFrom(
  options: EmbeddingOptions | undefined,
  log: (line: string) => void,
): Promise<Embedder | undefined> | undefined {
  if (options === false) return undefined;
  if (options && 'embedder' in options) return options.embedder;
  log('embedding model: loading in the background; search is lexical until it is ready');
  return loadEmbedder({
    allowRemote: options?.allowRemote ?? true,
    log,
    ...(options?.modelDir && { modelDir: options.modelDir }),
    ...(options?.model && { model: options.model }),
    ...(options?.cacheDir && { cacheDir: options.cacheDir }),
  });
}

/**
 * The gateway's search (SPEC §3.3, §3.5): the hybrid index of the local tools and every server's
 * tools, searching it through the search pipeline, and recording what a search returned in the
 * caller's scope of the discovery store. The embedding model starts loading here.
 */
export function createSearch(options: SearchOptions): Search {
  const { log, store, servers, reporter, filters } = options;
  const localNames = new Set(options.localTools.map((tool) => tool.name));
  /** Servers already reported as still connecting to a search (one log line each). */
  const reportedConnecting = new Set<string>();

  const embedder = embedderFrom(options.embeddings, log);
  // A model the gateway loaded itself is released with it; a shared one belongs to the caller.
  const ownsEmbedder = embedder !== undefined && !(options.embeddings && 'embedder' in options.embeddings);
  const index = new ToolIndex(embedder, { log });
  void index.settled().then((mode) => {
    if (mode === 'hybrid') log('embedding model ready: search is hybrid (BM25 + MiniLM)');
  });
  index.replace(
    undefined,
    options.localTools.map((tool) => ({
      name: tool.name,
      server: undefined,
      toolName: tool.name,
      description: tool.description,
      inputSchema: tool.inputSchema,
    })),
  );

  /** Tools with an output schema, by qualified name: a blocked result for them must be text (SPEC §3.10). */
  const withOutputSchema = new Set<string>();

  function indexServer(server: string, tools: readonly IndexedTool[], structured: readonly string[]): void {
    for (const tool of index.toolsOf(server)) withOutputSchema.delete(tool.name);
    for (const name of structured) withOutputSchema.add(name);
    index.replace(server, tools);
  }

  /**
   * The tools of `server` that can be indexed: a name that is invalid, or whose qualified name is
   * already another tool's, is skipped with one log line (the raw name quoted, never a raw newline).
   */
  function indexableTools(server: string, tools: readonly Tool[]): Tool[] {
    const seen = new Set<string>();
    return tools.filter((tool) => {
      const shown = JSON.stringify(String(tool.name).slice(0, 80));
      const problem = toolNameProblem(tool.name);
      if (problem) {
        log(`server "${server}": tool ${shown} skipped: ${problem}`);
        return false;
      }
      const qualified = qualifyName(server, tool.name);
      const owner = index.get(qualified);
      if (seen.has(qualified) || localNames.has(qualified) || (owner !== undefined && owner.server !== server)) {
        log(`server "${server}": tool ${shown} skipped: "${qualified}" already names another tool`);
        return false;
      }
      seen.add(qualified);
      return true;
    });
  }

  /**
   * Records what a search returned in the caller's scope (SPEC §3.5). A sessionless caller's own
   * live handle gathers this search too; any other handle (none, expired, forged, another
   * principal's) is replaced by a fresh one, since a search grants nothing by itself. Returns the
   * handle to pass back, for a handle scope.
   */
  async function remember(names: readonly string[], context: CallContext): Promise<string | undefined> {
    const { principal, scope } = context;
    if (scope.kind === 'session') {
      const key = scopeKey(principal, scope);
      if (key !== undefined) await store.remember(key, names);
      return undefined;
    }
    const presented = scopeKey(principal, scope);
    const handle = presented !== undefined && (await store.live(presented)) ? scope.handle : undefined;
    const kept = handle ?? mintHandle();
    const key = scopeKey(principal, { kind: 'handle', handle: kept });
    if (key !== undefined) await store.remember(key, names);
    return kept;
  }

  return {
    get mode() {
      return index.mode;
    },

    ready: () => index.settled(),

    async search(request, context) {
      await servers.startGrace();
      // Servers still connecting are not in the index yet: say so once each, not silently.
      for (const name of servers.connecting()) {
        if (reportedConnecting.has(name)) continue;
        reportedConnecting.add(name);
        log(`server "${name}" is still connecting; its tools are not searchable yet`);
      }
      const query = { query: request.query, topK: clampTopK(request.topK) };
      // Filters run before the top-k cut, over the best candidates in a window that widens until
      // top_k survive or no candidate is left, so a hidden tool never displaces a visible one.
      let visible: SearchResult['hits'] = [];
      for (let window = Math.max(searchWindow, query.topK * 4); ; window *= 4) {
        const ranked = (await index.search(query.query, window)).map((hit) => {
          const server = hit.server === undefined ? undefined : servers.facts(hit.server);
          return { ...hit, server };
        });
        visible = await runSearchPipeline(filters(), ranked, { query, context, reporter });
        if (visible.length >= query.topK || ranked.length < window) break;
      }
      const hits = visible.slice(0, query.topK);
      const handle = await remember(
        hits.map((hit) => hit.name),
        context,
      );
      return {
        mode: index.mode,
        hits,
        ...(handle !== undefined && { handle }),
        connecting: [...servers.connecting()],
      };
    },

    find(tool) {
      const indexed = index.get(tool);
      if (indexed === undefined) return undefined;
      return {
        server: indexed.server,
        toolName: indexed.toolName,
        inputSchema: indexed.inputSchema,
        hasOutputSchema: withOutputSchema.has(indexed.name),
      };
    },

    list(server, listed) {
      const tools = indexableTools(server, listed);
      indexServer(
        server,
        tools.map(
          (tool): IndexedTool => ({
            name: qualifyName(server, tool.name),
            server,
            toolName: tool.name,
            description: tool.description ?? '',
            inputSchema: tool.inputSchema,
          }),
        ),
        tools.filter((tool) => tool.outputSchema !== undefined).map((tool) => qualifyName(server, tool.name)),
      );
    },

    remove(server) {
      for (const tool of index.toolsOf(server)) withOutputSchema.delete(tool.name);
      index.remove(server);
    },
    count: (server) => index.toolsOf(server).length,

    async close() {
      if (ownsEmbedder) await (await embedder)?.close?.();
    },
  };
}
