import type { CallToolResult, Tool } from '@modelcontextprotocol/server';
import type { CredentialLookup } from '../credentials/credentialed-fetch';
import { Downstream, type ProtocolVerdicts } from '../downstream/downstream';
import type { RelayTarget } from '../downstream/relay-server-requests';
import { ProxyError } from '../errors';
import { type AccessControlOptions, accessControl } from '../filters/access-control';
import { type LoadControlOptions, loadControl } from '../filters/load-control';
import { type LoadResolver, safeLoad, safeLoadDispatcher } from '../filters/safe-load';
import { similarityThreshold } from '../filters/similarity-threshold';
import { nameProblem, qualifyName, toolNameProblem } from '../names';
import { bundleRouter, type RouteResolver } from '../policy/bundle-router';
import { credentialArguments } from '../policy/fetch-plan';
import type { PolicyBundle } from '../policy/load-bundle';
import { policyAugmenter } from '../policy/policy-augmenter';
import { type Embedder, loadEmbedder, type SearchModel } from '../search/embedder';
import { type IndexedTool, ToolIndex } from '../search/tool-index';
import { DEFAULT_SECRET_MARKERS } from '../transparent/transparent-config';
import { discoveryGate, listingGate } from './discovery-gate';
import { mintHandle, scopeDigest, scopeKey } from './discovery-scope';
import { type DiscoveryStore, memoryDiscoveryStore } from './discovery-store';
import {
  type PipelineReporter,
  runCallPipeline,
  runLoadPipeline,
  runResponsePipeline,
  runSearchPipeline,
} from './run-pipelines';
import type {
  AdmitReport,
  CallContext,
  CallFilter,
  CallInput,
  CallRequest,
  DispatchOutcome,
  DownstreamSpec,
  EventHook,
  Gateway,
  LoadFilter,
  LoadRequest,
  LoadResult,
  ResponseFilter,
  SearchFilter,
  SearchResult,
  ServerFacts,
  StartReport,
} from './types';

/**
 * `_meta` key by which a tool result says its outcome is unknown (`"unknown"`): the gateway then
 * reports the dispatch as `unknown`, so single-use evidence stays held (SPEC §4.7).
 */
export const outcomeMetaKey = 'io.extensible-mcp/outcome';

/** A tool implemented by the host, searched and called through the same pipelines as any other (SPEC §3.8). */
export interface LocalTool {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Tool['inputSchema'];
  readonly handler: (args: Record<string, unknown>, context: CallContext) => CallToolResult | Promise<CallToolResult>;
}

/** Where the gateway writes human-readable lines (stderr in the CLI: stdout carries stdio MCP). */
export interface ProxyLogger {
  info(line: string): void;
  error(line: string, error?: unknown): void;
}

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

/** A policy bundle as the gateway governs with it: the loaded bundle and its call filter (normally single-use around the policy). */
export interface GovernedBundle {
  readonly bundle: PolicyBundle;
  readonly filter: CallFilter;
}

/**
 * Which bundle governs which server (SPEC §4.8). The gateway builds the router (the last call
 * filter) and the search-side augmenter from it, and stamps each call with its bundle's
 * credential fields; the resolver reads only the admission facts the gateway stamps.
 */
export interface Governance {
  readonly resolve: RouteResolver;
  readonly bundles: Readonly<Record<string, GovernedBundle>>;
}

/** Options of {@link createGateway}. */
export interface GatewayOptions {
  /** Downstream servers admitted by the operator, by name. */
  readonly servers?: Readonly<Record<string, DownstreamSpec>>;
  readonly localTools?: readonly LocalTool[];
  /** `filters.similarity_threshold`. */
  readonly similarityThreshold?: number;
  readonly accessControl?: AccessControlOptions;
  /** `filters.load_control`. */
  readonly loadControl?: LoadControlOptions;
  /** The `rego_policy` filter, when configured (runs after the discovery gate). */
  readonly regoPolicy?: CallFilter;
  readonly extraSearchFilters?: readonly SearchFilter[];
  readonly extraCallFilters?: readonly CallFilter[];
  readonly extraResponseFilters?: readonly ResponseFilter[];
  readonly extraLoadFilters?: readonly LoadFilter[];
  /** Policy bundles and the routes to them. */
  readonly governance?: Governance;
  /** Receives a structured event for every decision. */
  readonly onEvent?: EventHook;
  readonly logger?: ProxyLogger;
  /** Default: the staged model if present, else lexical-only with one log line. */
  readonly embeddings?: EmbeddingOptions;
  readonly discoveryStore?: DiscoveryStore;
  /** Per-call downstream timeout; default 60 s. */
  readonly callTimeoutMs?: number;
  /** Timeout for connecting to a downstream and listing its tools; default 30 s. */
  readonly connectTimeoutMs?: number;
  /**
   * Credentials for Streamable HTTP downstreams, asked per request with the server name and the
   * exact URL, for configured servers and runtime loads alike (SPEC §3.9).
   */
  readonly credentials?: CredentialLookup;
  /**
   * Lets `load_mcp_server` reach `http://localhost` and loopback addresses (SPEC §3.4). Default
   * false: runtime loads are `https:` to public addresses only. Configured servers are unaffected.
   */
  readonly allowLocalhostLoads?: boolean;
  /** Resolves host names for runtime loads only (default: the system resolver); tests inject one. */
  readonly loadResolver?: LoadResolver;
  /**
   * How long after `start()` a search waits for configured servers still connecting; default
   * 10 s. Faces serve at once (a hung server never stalls `initialize`); an early search waits at
   * most this long, then answers with what is connected and logs who is still connecting.
   */
  readonly startGraceMs?: number;
}

/** The filter settings a reload may change (SPEC §3.1 `filters`): everything else is fixed at start. */
export type FilterOptions = Pick<
  GatewayOptions,
  'similarityThreshold' | 'accessControl' | 'loadControl' | 'regoPolicy'
>;

/** A new configuration for a running gateway (SIGHUP): the operator's servers and filters. */
export interface Reconfiguration extends FilterOptions {
  readonly servers: Readonly<Record<string, DownstreamSpec>>;
}

/** What a reconfiguration did to the operator's servers, by name. */
export interface ReconfigureReport {
  readonly added: readonly string[];
  readonly repointed: readonly string[];
  readonly removed: readonly string[];
  readonly failed: readonly { readonly name: string; readonly reason: string }[];
  /** How many tools each added or re-pointed server now has indexed. */
  readonly tools: Readonly<Record<string, number>>;
}

/** How long a session's client may take to answer a downstream's request (a human filling a form). */
const relayTimeoutMs = 10 * 60_000;

const defaultTopK = 5;
const maxTopK = 50;
/** How many ranked candidates the search filters see first (the window widens when they hide many). */
const searchWindow = 200;

/** Clamps `top_k` to 1..50: a non-positive or absurd value never returns the whole index. */
export function clampTopK(value: number | undefined): number {
  if (value === undefined || Number.isNaN(value)) return defaultTopK;
  return Math.min(maxTopK, Math.max(1, Math.trunc(value)));
}

const stderrLogger: ProxyLogger = {
  info: (line) => process.stderr.write(`[extensible-mcp] ${line}\n`),
  error: (line, error) =>
    process.stderr.write(`[extensible-mcp] ${line}${error instanceof Error ? `: ${error.message}` : ''}\n`),
};

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

function textResult(text: string, isError = false): CallToolResult {
  return { content: [{ type: 'text', text }], ...(isError && { isError: true }) };
}

/** Whether two server specs reach the same server the same way (command, args, env or URL). */
function sameSpec(left: DownstreamSpec, right: DownstreamSpec): boolean {
  if (left.kind === 'in-process' || right.kind === 'in-process') return left === right;
  return JSON.stringify(left) === JSON.stringify(right);
}

function elapsedUs(start: bigint): number {
  return Number((process.hrtime.bigint() - start) / 1000n);
}

/**
 * Builds the gateway (SPEC §3.12): the downstream registry, the hybrid index, the four pipelines
 * in their fixed order (assembled here and nowhere else) and dispatch. The discovery gate is part
 * of the call pipeline and cannot be configured away; local tools go through the same pipeline
 * as downstream tools. The face says how "discovered" is supplied (SPEC §3.5): by default what
 * `search` recorded in the caller's scope; with a `listing` connection in the context (transparent
 * mode), what that connection lists now.
 */
export function createGateway(options: GatewayOptions = {}): Gateway {
  const logger = options.logger ?? stderrLogger;
  const log = (line: string) => logger.info(line);
  const callTimeoutMs = options.callTimeoutMs ?? 60_000;
  const store = options.discoveryStore ?? memoryDiscoveryStore();
  const downstreams = new Map<string, Downstream>();
  /** Names being admitted right now: admission is serialised per name (SPEC §3.4). */
  const admitting = new Set<string>();
  /** Calls in flight per downstream, by server name: whom a downstream's own request belongs to. */
  const inFlight = new Map<Downstream, Set<{ readonly context: CallContext }>>();
  const localTools = new Map<string, LocalTool>();
  /** How each stdio command answered its one protocol probe, for the life of the gateway (issue 31). */
  const verdicts: ProtocolVerdicts = new Map();
  /**
   * The URL the operator admitted each HTTP server name at (config or `admit`): the only URL its
   * token is ever presented to (SPEC §3.9). A runtime load never adds to it.
   */
  const operatorUrls = new Map<string, string>();
  for (const [name, spec] of Object.entries(options.servers ?? {}))
    if (spec.kind === 'http') operatorUrls.set(name, spec.url);
  /**
   * Every name the operator admitted (config or `admit`): the operator's, connected or not, so a
   * runtime load can never re-point it while it is down (SPEC §3.4).
   */
  const operatorNames = new Set(Object.keys(options.servers ?? {}));
  /** The safe default for runtime loads: whatever `load_control` says, this floor holds. */
  const safeLoadOptions = {
    allowLocalhost: options.allowLocalhostLoads === true,
    ...(options.loadResolver && { resolve: options.loadResolver }),
  };
  const safeLoadFilters: LoadFilter[] = [safeLoad(safeLoadOptions)];
  /** Servers already reported as still connecting to a search (one log line each). */
  const reportedConnecting = new Set<string>();
  /** The configured servers' connections while `start()` runs, and until when a search waits for them. */
  let starting: { settled: Promise<unknown>; until: number } | undefined;

  /** Waits for `start()` to settle, but never past its grace period. */
  async function awaitStartGrace(): Promise<void> {
    const remaining = starting ? starting.until - Date.now() : 0;
    if (!starting || remaining <= 0) return;
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, remaining);
      timer.unref();
    });
    await Promise.race([starting.settled, expired]);
    clearTimeout(timer);
  }
  /** The connection pool of each runtime-loaded server, whose own lookup checks every address. */
  const loadDispatchers = new Map<string, ReturnType<typeof safeLoadDispatcher>>();
  const emit: EventHook = options.onEvent ?? (() => undefined);
  const reporter: PipelineReporter = {
    emit,
    onFilterError: (filter, error) => logger.error(`filter ${filter} failed`, error),
  };

  for (const tool of options.localTools ?? []) {
    const problem = nameProblem(tool.name);
    if (problem) throw new ProxyError('invalid-name', `Invalid local tool name: ${problem}.`);
    if (localTools.has(tool.name)) throw new ProxyError('invalid-name', `Duplicate local tool "${tool.name}".`);
    localTools.set(tool.name, tool);
  }

  // The four pipelines, in the order of SPEC §3.6. This is the only place that knows it.
  const governance = options.governance;
  const governedBundles = governance
    ? Object.fromEntries(Object.entries(governance.bundles).map(([name, governed]) => [name, governed.bundle]))
    : {};
  /** The four pipelines built from the filter options; a reload builds them again (SPEC §3.6). */
  const searched = discoveryGate({ store });
  const listed = listingGate();
  /** The discovery gate (SPEC §3.5), supplied by the face: its listing connection, else the store. */
  const discovered: CallFilter = function discoveryGate(request, context) {
    return context.listing !== undefined ? listed(request, context) : searched(request, context);
  };
  function assemble(filters: FilterOptions) {
    const access = accessControl(filters.accessControl ?? {});
    return {
      search: [
        ...(filters.similarityThreshold !== undefined
          ? [similarityThreshold({ threshold: filters.similarityThreshold })]
          : []),
        access.search,
        ...(options.extraSearchFilters ?? []),
        ...(governance ? [policyAugmenter({ resolve: governance.resolve, bundles: governedBundles })] : []),
      ] as SearchFilter[],
      call: [
        access.call,
        discovered,
        ...(filters.regoPolicy ? [filters.regoPolicy] : []),
        ...(options.extraCallFilters ?? []),
        ...(governance
          ? [
              bundleRouter({
                resolve: governance.resolve,
                bundles: Object.fromEntries(
                  Object.entries(governance.bundles).map(([name, { filter }]) => [name, filter]),
                ),
              }),
            ]
          : []),
      ] as CallFilter[],
      response: [...(options.extraResponseFilters ?? [])] as ResponseFilter[],
      load: [
        ...(filters.loadControl ? [loadControl(filters.loadControl)] : []),
        ...(options.extraLoadFilters ?? []),
      ] as LoadFilter[],
    };
  }
  let pipelines = assemble(options);

  // The model loads only once the options are known to be good: a bad pattern throws above,
  // before any worker thread exists.
  const embedder = embedderFrom(options.embeddings, log);
  // A model the gateway loaded itself is released with it; a shared one belongs to the caller.
  const ownsEmbedder = embedder !== undefined && !(options.embeddings && 'embedder' in options.embeddings);
  const index = new ToolIndex(embedder, { log });
  void index.settled().then((mode) => {
    if (mode === 'hybrid') log('embedding model ready: search is hybrid (BM25 + MiniLM)');
  });
  index.replace(
    undefined,
    [...localTools.values()].map((tool) => ({
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
      if (seen.has(qualified) || localTools.has(qualified) || (owner !== undefined && owner.server !== server)) {
        log(`server "${server}": tool ${shown} skipped: "${qualified}" already names another tool`);
        return false;
      }
      seen.add(qualified);
      return true;
    });
  }

  /**
   * The session a shared downstream's request belongs to (SPEC §3.10): the one whose call to it is
   * in flight. None in flight, or calls from several sessions at once (stdio carries no related
   * request id, so the asker cannot be told apart), and the request is refused: never guessed.
   */
  function routeServerRequest(name: string, downstream: Downstream): RelayTarget {
    const calls = [...(inFlight.get(downstream) ?? [])];
    const latest = calls.at(-1)?.context;
    if (latest === undefined) return { refused: `no call to server "${name}" is in progress` };
    const asking = new Set(calls.map((call) => scopeDigest(call.context.principal, call.context.scope)));
    if (asking.size > 1) {
      return {
        refused: `calls from ${asking.size} sessions to server "${name}" are in progress; the proxy cannot tell which one asked`,
      };
    }
    if (latest.relay === undefined) return { refused: 'the calling session cannot receive requests' };
    return { send: latest.relay, capabilities: latest.clientCapabilities ?? {} };
  }

  /** Runs `call` on `downstream`, marked in flight for it (request routing, graceful retirement). */
  async function tracked<T>(downstream: Downstream, context: CallContext, call: () => Promise<T>): Promise<T> {
    const entry = { context };
    const calls = inFlight.get(downstream) ?? new Set();
    inFlight.set(downstream, calls);
    calls.add(entry);
    try {
      return await call();
    } finally {
      calls.delete(entry);
      if (calls.size === 0) {
        inFlight.delete(downstream);
        retiring.get(downstream)?.();
      }
    }
  }

  /** Closes `downstream` now, or once the calls in flight on it have ended. */
  function retire(downstream: Downstream): Promise<void> {
    if (!inFlight.has(downstream)) return downstream.close();
    return new Promise((resolve) => {
      retiring.set(downstream, () => {
        retiring.delete(downstream);
        void downstream.close().finally(resolve);
      });
    });
  }
  const retiring = new Map<Downstream, () => void>();

  function register(
    name: string,
    spec: DownstreamSpec,
    admission: ServerFacts['admission'],
    dispatcher?: ReturnType<typeof safeLoadDispatcher>,
  ): Downstream {
    const problem = nameProblem(name);
    if (problem) throw new ProxyError('invalid-name', `Invalid server name: ${problem}.`);
    const lookup = options.credentials;
    const downstream: Downstream = new Downstream({
      name,
      spec,
      admission,
      callTimeoutMs,
      connectTimeoutMs: options.connectTimeoutMs ?? 30_000,
      log,
      verdicts,
      ...(dispatcher && { dispatcher }),
      // The operator's servers may ask the calling session (form, sampling, roots); a server the
      // model loaded at runtime is untrusted and is declared nothing, so it can ask nobody.
      ...(admission !== 'runtime' && {
        relay: {
          label: `server "${name}"`,
          markers: { nameMarkers: DEFAULT_SECRET_MARKERS, schemaMarkers: DEFAULT_SECRET_MARKERS },
          timeoutMs: relayTimeoutMs,
          log,
          target: () => routeServerRequest(name, downstream),
        },
      }),
      // Bound to this server's name: the lookup decides per URL whether a token is presented.
      ...(lookup &&
        spec.kind === 'http' && {
          credentials: (url: string) => lookup({ serverName: name, url, configuredUrl: operatorUrls.get(name) }),
        }),
      onTools: (listed) => {
        const tools = indexableTools(name, listed);
        indexServer(
          name,
          tools.map(
            (tool): IndexedTool => ({
              name: qualifyName(name, tool.name),
              server: name,
              toolName: tool.name,
              description: tool.description ?? '',
              inputSchema: tool.inputSchema,
            }),
          ),
          tools.filter((tool) => tool.outputSchema !== undefined).map((tool) => qualifyName(name, tool.name)),
        );
      },
    });
    downstreams.set(name, downstream);
    return downstream;
  }

  /** Connects and indexes a new server; one admission per name at a time. */
  async function admitServer(
    name: string,
    spec: DownstreamSpec,
    admission: ServerFacts['admission'],
    dispatcher?: ReturnType<typeof safeLoadDispatcher>,
  ): Promise<AdmitReport> {
    if (admitting.has(name) || downstreams.has(name)) {
      throw new ProxyError('already-admitted', `A server named "${name}" is already admitted; choose another name.`);
    }
    admitting.add(name);
    try {
      const downstream = register(name, spec, admission, dispatcher);
      try {
        await downstream.connect();
      } catch (error) {
        downstreams.delete(name);
        index.remove(name);
        throw error;
      }
      if (dispatcher) loadDispatchers.set(name, dispatcher);
      const { protocolVersion } = downstream;
      return { server: name, tools: index.toolsOf(name).length, ...(protocolVersion && { protocolVersion }) };
    } finally {
      admitting.delete(name);
    }
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

  /** What the gateway knows about `tool` for this session: the stamp every filter reads. */
  async function stamp(input: CallInput, context: CallContext): Promise<CallRequest> {
    let server: ServerFacts | undefined;
    let toolName: string | undefined;
    let inputSchema: Tool['inputSchema'] | undefined;
    let hasOutputSchema = false;
    const connection = context.listing;
    if (connection !== undefined) {
      const listed = await connection.find(input.tool);
      if (listed) {
        server = connection.facts;
        toolName = listed.name;
        inputSchema = listed.inputSchema;
        hasOutputSchema = listed.outputSchema !== undefined;
      }
    } else {
      const indexed = index.get(input.tool);
      const downstream = indexed?.server === undefined ? undefined : downstreams.get(indexed.server);
      if (indexed && (indexed.server === undefined || downstream)) {
        server = downstream?.facts;
        toolName = indexed.toolName;
        inputSchema = indexed.inputSchema;
        hasOutputSchema = withOutputSchema.has(indexed.name);
      }
    }
    return {
      tool: input.tool,
      toolName,
      server,
      arguments: input.arguments,
      ...(inputSchema !== undefined && { inputSchema }),
      hasOutputSchema,
      credentialFields: server ? await credentialFieldsOf(server) : [],
    };
  }

  /**
   * {@link stamp} inside the fail-closed rule: the host's route resolver and a transparent face's
   * listing run there, and a fault in either refuses the call, logged with its cause and reported
   * as an event; the caller sees a ProxyError's message, else a generic reason.
   */
  async function stampOrRefuse(input: CallInput, context: CallContext): Promise<CallRequest | CallToolResult> {
    const start = process.hrtime.bigint();
    try {
      return await stamp(input, context);
    } catch (error) {
      logger.error(`looking up tool ${input.tool} failed`, error);
      const reason = ProxyError.isInstance(error)
        ? error.message
        : `Refused: the proxy could not look up "${input.tool}", so the call was blocked (fail closed).`;
      emit({
        ts: new Date().toISOString(),
        principal: context.principal.id,
        scope: scopeDigest(context.principal, context.scope),
        pipeline: 'call',
        filter: 'stamp',
        tool: input.tool,
        decision: 'error',
        reason,
        durationUs: elapsedUs(start),
      });
      return textResult(reason, true);
    }
  }

  async function credentialFieldsOf(server: ServerFacts): Promise<readonly string[]> {
    if (!governance) return [];
    const route = await governance.resolve(server);
    const governed =
      route.kind === 'bundle' && Object.hasOwn(governance.bundles, route.bundle)
        ? governance.bundles[route.bundle]
        : undefined;
    return governed ? credentialArguments(governed.bundle.fetchPlan) : [];
  }

  /** Runs the final request: the local tool, or the downstream (never replayed after a lost connection). */
  async function dispatch(request: CallRequest, context: CallContext): Promise<DispatchOutcome> {
    try {
      if (request.server === undefined) {
        const local = request.toolName === undefined ? undefined : localTools.get(request.toolName);
        if (!local)
          return { status: 'failed', reason: `Unknown tool "${request.tool}". Use search_tools to find tools.` };
        return { status: 'completed', result: await local.handler({ ...request.arguments }, context) };
      }
      const target = context.listing ?? downstreams.get(request.server.name);
      const toolName = request.toolName;
      if (!target || toolName === undefined) {
        return { status: 'failed', reason: `Unknown tool "${request.tool}". Use search_tools to find tools.` };
      }
      const result =
        target instanceof Downstream
          ? await tracked(target, context, () => target.call(toolName, { ...request.arguments }))
          : await target.call(toolName, { ...request.arguments }, context);
      // A server that cannot tell whether its side effect happened (a payment rail that timed out)
      // says so; claiming it only ever keeps evidence held, never releases it.
      if (result._meta?.[outcomeMetaKey] === 'unknown') {
        const text = result.content
          .map((block) => (block.type === 'text' ? block.text : ''))
          .join(' ')
          .trim();
        return { status: 'unknown', reason: text || `Tool "${request.tool}" could not confirm its outcome.` };
      }
      return { status: 'completed', result };
    } catch (error) {
      if (ProxyError.isInstance(error)) {
        const unknown = error.code === 'downstream-timeout' || error.code === 'outcome-unknown';
        return { status: unknown ? 'unknown' : 'failed', reason: error.message };
      }
      logger.error(`tool ${request.tool} failed`, error);
      return { status: 'failed', reason: `Tool "${request.tool}" failed unexpectedly.` };
    }
  }

  const gateway: Gateway = {
    get searchMode() {
      return index.mode;
    },

    ready: () => index.settled(),

    async search(request, context): Promise<SearchResult> {
      await awaitStartGrace();
      // Servers still connecting are not in the index yet: say so once each, not silently.
      for (const name of admitting) {
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
          const server = hit.server === undefined ? undefined : downstreams.get(hit.server)?.facts;
          return { ...hit, server };
        });
        visible = await runSearchPipeline(pipelines.search, ranked, { query, context, reporter });
        if (visible.length >= query.topK || ranked.length < window) break;
      }
      const hits = visible.slice(0, query.topK);
      const handle = await remember(
        hits.map((hit) => hit.name),
        context,
      );
      return { mode: index.mode, hits, ...(handle !== undefined && { handle }), connecting: [...admitting] };
    },

    async call(input, context) {
      const request = await stampOrRefuse(input, context);
      if ('content' in request) return request;
      const decided = await runCallPipeline(pipelines.call, request, { context, reporter });
      if (!decided.allowed) return decided.result ?? textResult(decided.reason, true);
      // A filter that renamed the tool gets the stamp of the tool it named, never the old one's server.
      const renamed = decided.value.tool === request.tool ? undefined : await stampOrRefuse(decided.value, context);
      if (renamed !== undefined && 'content' in renamed) return renamed;
      const final = renamed === undefined ? decided.value : { ...renamed, arguments: decided.value.arguments };
      const start = process.hrtime.bigint();
      const outcome = await decided.wrap(() => dispatch(final, context));
      if (outcome.status !== 'completed') {
        const reason =
          outcome.status === 'unknown'
            ? `${outcome.reason} The outcome is unknown: the call may have run, and it was not retried.`
            : outcome.reason;
        emit({
          ts: new Date().toISOString(),
          principal: context.principal.id,
          scope: scopeDigest(context.principal, context.scope),
          pipeline: 'call',
          filter: 'dispatch',
          tool: final.tool,
          decision: 'error',
          reason,
          durationUs: elapsedUs(start),
        });
        return textResult(reason, true);
      }
      const answered = await runResponsePipeline(pipelines.response, outcome.result, {
        request: final,
        context,
        reporter,
      });
      return answered.allowed ? answered.value : textResult(answered.reason, true);
    },

    async load(request: LoadRequest, context): Promise<LoadResult> {
      const name = request.serverName;
      const problem = nameProblem(name);
      if (problem) return { loaded: false, reason: `Invalid server name: ${problem}.` };
      // A configured name is the operator's, connected or not (SPEC §3.4). The one load it allows
      // is a retry of the operator's own server at exactly the operator's URL (after a failed
      // start or a rotated token): nothing is re-pointed, and it stays the operator's admission.
      const operatorUrl = operatorUrls.get(name);
      const retry = operatorNames.has(name) && operatorUrl !== undefined && request.url === operatorUrl;
      if (operatorNames.has(name) && !retry) {
        const reason = `The server name "${name}" belongs to the operator's configuration and cannot be loaded at another address; choose another name.`;
        // Reported like a load filter's refusal: a hijack attempt belongs on the live log.
        emit({
          ts: new Date().toISOString(),
          principal: context.principal.id,
          scope: scopeDigest(context.principal, context.scope),
          pipeline: 'load',
          filter: 'configuredNames',
          tool: name,
          decision: 'deny',
          reason,
          durationUs: 0,
        });
        return { loaded: false, reason };
      }
      if (downstreams.has(name) || admitting.has(name)) {
        return { loaded: false, reason: `A server named "${name}" is already connected; choose another name.` };
      }
      const decided = await runLoadPipeline(pipelines.load, request, { context, reporter });
      if (!decided.allowed) return { loaded: false, reason: decided.reason };
      // The safe default runs after the operator's filters, whatever they allowed; an operator
      // server is trusted where it is and skips it.
      if (!retry) {
        const safe = await runLoadPipeline(safeLoadFilters, request, { context, reporter });
        if (!safe.allowed) return { loaded: false, reason: safe.reason };
      }
      let refused: string | undefined;
      const dispatcher = retry
        ? undefined
        : safeLoadDispatcher({
            ...safeLoadOptions,
            onRefused: (reason) => {
              refused = reason;
              log(`server "${name}": connection refused: ${reason}`);
            },
          });
      try {
        const report = await admitServer(
          name,
          { kind: 'http', url: request.url },
          retry ? 'config' : 'runtime',
          dispatcher,
        );
        return { loaded: true, server: report.server, tools: report.tools };
      } catch (error) {
        await dispatcher?.close().catch(() => undefined);
        if (refused !== undefined) return { loaded: false, reason: `Refused to load "${name}": ${refused}` };
        const reason = ProxyError.isInstance(error) ? error.message : `Could not load "${name}".`;
        return { loaded: false, reason };
      }
    },

    admit(name, spec) {
      // Bind before connecting: the credential lookup needs the operator's URL for this name.
      if (!downstreams.has(name) && !admitting.has(name)) {
        if (spec.kind === 'http') operatorUrls.set(name, spec.url);
        operatorNames.add(name);
      }
      return admitServer(name, spec, spec.kind === 'in-process' ? 'in-process' : 'config');
    },

    async start(): Promise<StartReport> {
      const entries = Object.entries(options.servers ?? {});
      if (entries.length > 0) log(`connecting ${entries.length} servers: ${entries.map(([name]) => name).join(', ')}`);
      const settling = Promise.allSettled(entries.map(([name, spec]) => gateway.admit(name, spec)));
      starting = { settled: settling, until: Date.now() + (options.startGraceMs ?? 10_000) };
      const outcomes = await settling;
      starting = undefined;
      const connected: string[] = [];
      const failed: { name: string; reason: string }[] = [];
      outcomes.forEach((outcome, position) => {
        const name = entries[position]?.[0] ?? '';
        if (outcome.status === 'fulfilled') connected.push(name);
        else
          failed.push({
            name,
            reason: outcome.reason instanceof Error ? outcome.reason.message : String(outcome.reason),
          });
      });
      log(
        `connected ${connected.length} of ${entries.length} servers${connected.length ? `: ${connected.join(', ')}` : ''}`,
      );
      for (const failure of failed) log(`server "${failure.name}" failed to start: ${failure.reason}`);
      return { connected, failed };
    },

    async close() {
      await Promise.allSettled([...downstreams.values()].map((downstream) => downstream.close()));
      await Promise.allSettled([...loadDispatchers.values()].map((dispatcher) => dispatcher.close()));
      if (ownsEmbedder) await (await embedder)?.close?.();
    },

    async reconfigure(next) {
      // Filters first: a bad pattern throws here and nothing has changed yet.
      const rebuilt = assemble(next);
      pipelines = rebuilt;
      const added: string[] = [];
      const repointed: string[] = [];
      const removed: string[] = [];
      const failed: { name: string; reason: string }[] = [];
      const tools: Record<string, number> = {};
      const reason = (error: unknown) => (error instanceof Error ? error.message : String(error));
      // Removed: configured names the new config no longer holds (runtime loads are not the config's).
      for (const name of [...operatorNames]) {
        if (Object.hasOwn(next.servers, name)) continue;
        const downstream = downstreams.get(name);
        // A host's in-process server is not the config file's to remove.
        if (downstream?.admission === 'in-process') continue;
        operatorNames.delete(name);
        operatorUrls.delete(name);
        if (downstream) {
          downstreams.delete(name);
          index.remove(name);
          void retire(downstream);
        }
        removed.push(name);
      }
      for (const [name, spec] of Object.entries(next.servers)) {
        const current = downstreams.get(name);
        if (current && sameSpec(current.spec, spec)) continue;
        if (current) {
          // Re-pointed: the old connection serves its calls in flight, new calls go to the new one.
          downstreams.delete(name);
          index.remove(name);
          void retire(current);
        }
        operatorNames.add(name);
        if (spec.kind === 'http') operatorUrls.set(name, spec.url);
        else operatorUrls.delete(name);
        try {
          const admitted = await admitServer(name, spec, spec.kind === 'in-process' ? 'in-process' : 'config');
          tools[name] = admitted.tools;
          (current ? repointed : added).push(name);
        } catch (error) {
          failed.push({ name, reason: reason(error) });
        }
      }
      return { added, repointed, removed, failed, tools };
    },
  };
  return gateway;
}
