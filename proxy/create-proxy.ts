import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListToolsRequestSchema,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { CredentialLookup } from './credentials/credentialed-fetch';
import { type DiscoveryStore, memoryDiscoveryStore } from './discovery-store';
import { type Admission, Downstream, type DownstreamSpec } from './downstream';
import { type Embedder, loadMiniLm } from './embedder';
import { ProxyError } from './errors';
import { type AccessControlOptions, accessControl } from './filters/access-control';
import { discoveryGate } from './filters/discovery-gate';
import { type LoadControlOptions, loadControl } from './filters/load-control';
import { similarityThreshold } from './filters/similarity-threshold';
import { nameProblem, qualifyName } from './names';
import {
  type CallFilter,
  type CallRequest,
  type EventHook,
  type FilterContext,
  type LoadFilter,
  type PipelineReporter,
  type ResponseFilter,
  runCallPipeline,
  runLoadPipeline,
  runResponsePipeline,
  runSearchPipeline,
  type SearchFilter,
  type SearchHit,
} from './pipeline';
import { type IndexedTool, ToolIndex } from './tool-index';

/** A tool implemented by the host, searched and called through the same pipelines as any other. */
export interface LocalTool {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Tool['inputSchema'];
  readonly handler: (args: Record<string, unknown>, context: FilterContext) => CallToolResult | Promise<CallToolResult>;
}

/** Where the proxy writes human-readable lines (stderr in the CLI: stdout carries stdio MCP). */
export interface ProxyLogger {
  info(line: string): void;
  error(line: string, error?: unknown): void;
}

/** How the tool index gets its embedding model. */
export type EmbeddingOptions =
  | false
  | { readonly modelDir?: string; readonly allowRemote: boolean }
  | { readonly embedder: Promise<Embedder | undefined> };

/** Options of {@link createProxy}. */
export interface CreateProxyOptions {
  /** Downstream servers admitted by the operator, by name. */
  readonly servers?: Readonly<Record<string, DownstreamSpec>>;
  readonly localTools?: readonly LocalTool[];
  /** `filters.similarity_threshold`. */
  readonly similarityThreshold?: number;
  readonly accessControl?: AccessControlOptions;
  readonly loadControl?: LoadControlOptions;
  /** The `rego_policy` filter, when configured (runs after the discovery gate). */
  readonly regoPolicy?: CallFilter;
  readonly extraSearchFilters?: readonly SearchFilter[];
  readonly extraCallFilters?: readonly CallFilter[];
  readonly extraResponseFilters?: readonly ResponseFilter[];
  readonly extraLoadFilters?: readonly LoadFilter[];
  /** The bundle router: the last call filter (SPEC §3.6). */
  readonly bundleRouter?: CallFilter;
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
   * exact URL, for configured servers and runtime `load_mcp_server` alike (SPEC §3.9). Without
   * it every HTTP downstream is anonymous.
   */
  readonly credentials?: CredentialLookup;
}

/** What {@link ExtensibleProxy.start} managed to connect. */
export interface StartReport {
  readonly connected: readonly string[];
  readonly failed: readonly { readonly name: string; readonly reason: string }[];
}

/** The proxy: one set of downstreams and one index, served to any number of MCP sessions. */
export interface ExtensibleProxy {
  /** Connects every configured server; unreachable ones are reported, not fatal. */
  start(): Promise<StartReport>;
  /** A new MCP server for one client connection (its own session). Connect it to a transport. */
  createServer(): Server;
  /** Admits and indexes a server while running (used by `add-server` reloads). */
  addServer(name: string, spec: DownstreamSpec, admission?: Admission): Promise<number>;
  /** The connected downstreams, by name (admission facts for the router). */
  downstream(name: string): Downstream | undefined;
  readonly index: ToolIndex;
  close(): Promise<void>;
}

const defaultTopK = 5;
/** How many ranked candidates the search filters see first (the window widens when they hide many). */
const searchWindow = 200;
const maxTopK = 50;

/** Clamps `top_k` to 1..50: a non-positive or absurd value never returns the whole index. */
export function clampTopK(value: number | undefined): number {
  if (value === undefined || Number.isNaN(value)) return defaultTopK;
  return Math.min(maxTopK, Math.max(1, Math.trunc(value)));
}

const instructions = [
  'This server is a gateway to many tools. Workflow:',
  '1. Call search_tools with a short description of what you want to do.',
  '2. Call call_tool with the exact tool_name from the search results and its arguments.',
  'Only tools that search_tools returned in this session can be called; search again if a call says the tool was not discovered.',
  'load_mcp_server connects an additional Streamable HTTP MCP server by URL when the user asks for one.',
  'Never ask the user for a password, token or API key in chat: credentials are configured by the operator outside this conversation.',
].join('\n');

const metaTools: Tool[] = [
  {
    name: 'search_tools',
    description:
      'Find tools for a task. Returns the best-matching tools with their exact names, descriptions and input schemas. Call this before call_tool: only tools found here in this session can be called.',
    inputSchema: {
      type: 'object',
      properties: {
        query: { type: 'string', description: 'What you want to do, in a few words.' },
        top_k: {
          type: 'integer',
          minimum: 1,
          maximum: maxTopK,
          default: defaultTopK,
          description: 'How many tools to return (1-50).',
        },
      },
      required: ['query'],
    },
  },
  {
    name: 'call_tool',
    description: 'Call a tool found by search_tools, by its exact name, with arguments matching its input schema.',
    inputSchema: {
      type: 'object',
      properties: {
        tool_name: { type: 'string', description: 'The exact name returned by search_tools.' },
        arguments: { type: 'object', description: "The tool's arguments.", additionalProperties: true },
      },
      required: ['tool_name'],
    },
  },
  {
    name: 'load_mcp_server',
    description:
      "Connect an additional MCP server over Streamable HTTP and index its tools, subject to the operator's load policy. Then use search_tools to find its tools.",
    inputSchema: {
      type: 'object',
      properties: {
        server_name: {
          type: 'string',
          description: 'A short name for the server (letters, digits, "-", "_"; no "__").',
        },
        url: { type: 'string', description: "The server's Streamable HTTP endpoint (http or https)." },
      },
      required: ['server_name', 'url'],
    },
  },
];

const searchInput = z.strictObject({
  query: z.string().trim().min(1).max(1_000),
  top_k: z.number().finite().optional(),
});
const callInput = z.strictObject({
  tool_name: z.string().min(1).max(256),
  arguments: z.record(z.string(), z.unknown()).default({}),
});
const loadInput = z.strictObject({ server_name: z.string().min(1).max(64), url: z.string().min(1).max(2_048) });

function textResult(text: string, isError = false): CallToolResult {
  return { content: [{ type: 'text', text }], ...(isError && { isError: true }) };
}

function inputError(tool: string, error: z.ZodError): CallToolResult {
  const details = error.issues.map((issue) => `${issue.path.join('.') || 'input'}: ${issue.message}`).join('; ');
  return textResult(`Invalid arguments for ${tool}: ${details}.`, true);
}

const stderrLogger: ProxyLogger = {
  info: (line) => process.stderr.write(`[extensible-mcp] ${line}\n`),
  error: (line, error) =>
    process.stderr.write(
      `[extensible-mcp] ${line}${error instanceof Error ? `: ${error.stack ?? error.message}` : ''}\n`,
    ),
};

function embedderFrom(
  options: EmbeddingOptions | undefined,
  log: (line: string) => void,
): Promise<Embedder | undefined> | undefined {
  if (options === false) return undefined;
  if (options && 'embedder' in options) return options.embedder;
  log('embedding model: loading in the background; search is lexical until it is ready');
  return loadMiniLm({
    allowRemote: options?.allowRemote ?? true,
    log,
    ...(options?.modelDir && { modelDir: options.modelDir }),
  });
}

/**
 * Builds the proxy (SPEC §3): downstreams, the hybrid index, the three meta-tools and the four
 * pipelines in their fixed order. The discovery gate is part of the call pipeline and cannot be
 * configured away; local tools go through the same pipeline as downstream tools.
 */
export function createProxy(options: CreateProxyOptions = {}): ExtensibleProxy {
  const logger = options.logger ?? stderrLogger;
  const log = (line: string) => logger.info(line);
  const callTimeoutMs = options.callTimeoutMs ?? 60_000;
  const embedder = embedderFrom(options.embeddings, log);
  // A model the proxy loaded itself is released with it; a shared one belongs to the caller.
  const ownsEmbedder = embedder !== undefined && !(options.embeddings && 'embedder' in options.embeddings);
  const index = new ToolIndex(embedder);
  void index.settled().then((mode) => {
    if (mode === 'hybrid') log('embedding model ready: search is hybrid (BM25 + MiniLM)');
  });
  const store = options.discoveryStore ?? memoryDiscoveryStore();
  const downstreams = new Map<string, Downstream>();
  const localTools = new Map<string, LocalTool>();
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

  const access = accessControl(options.accessControl ?? {});
  const searchFilters: SearchFilter[] = [
    ...(options.similarityThreshold !== undefined
      ? [similarityThreshold({ threshold: options.similarityThreshold })]
      : []),
    access.search,
    ...(options.extraSearchFilters ?? []),
  ];
  const callFilters: CallFilter[] = [
    access.call,
    discoveryGate({ store }),
    ...(options.regoPolicy ? [options.regoPolicy] : []),
    ...(options.extraCallFilters ?? []),
    ...(options.bundleRouter ? [options.bundleRouter] : []),
  ];
  const responseFilters = [...(options.extraResponseFilters ?? [])];
  const loadFilters: LoadFilter[] = [
    ...(options.loadControl ? [loadControl(options.loadControl)] : []),
    ...(options.extraLoadFilters ?? []),
  ];

  function admit(name: string, spec: DownstreamSpec, admission: Admission): Downstream {
    const problem = nameProblem(name);
    if (problem) throw new ProxyError('invalid-name', `Invalid server name: ${problem}.`);
    const lookup = options.credentials;
    const downstream = new Downstream({
      name,
      spec,
      admission,
      callTimeoutMs,
      connectTimeoutMs: options.connectTimeoutMs ?? 30_000,
      log,
      // Bound to this server's name: the lookup decides per URL whether a token is presented.
      ...(lookup && spec.kind === 'http' && { credentials: (url: string) => lookup(name, url) }),
      onTools: (tools) =>
        index.replace(
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
        ),
    });
    downstreams.set(name, downstream);
    return downstream;
  }

  async function connectNew(name: string, spec: DownstreamSpec, admission: Admission): Promise<number> {
    const downstream = admit(name, spec, admission);
    try {
      await downstream.connect();
    } catch (error) {
      downstreams.delete(name);
      throw error;
    }
    return index.toolsOf(name).length;
  }

  async function search(args: unknown, context: FilterContext): Promise<CallToolResult> {
    const parsed = searchInput.safeParse(args);
    if (!parsed.success) return inputError('search_tools', parsed.error);
    const query = { query: parsed.data.query, topK: clampTopK(parsed.data.top_k) };
    // Filters run before the top-k cut, over the best candidates in a window that widens until
    // top_k survive or no candidate is left, so a hidden tool never displaces a visible one.
    let visible: readonly SearchHit[] = [];
    for (let window = Math.max(searchWindow, query.topK * 4); ; window *= 4) {
      const ranked = await index.search(query.query, window);
      visible = await runSearchPipeline(searchFilters, ranked, { query, context, reporter });
      if (visible.length >= query.topK || ranked.length < window) break;
    }
    const hits = visible.slice(0, query.topK);
    await store.remember(
      context.session,
      hits.map((hit) => hit.name),
    );
    if (hits.length === 0) {
      return textResult(
        `No tools matched "${query.query}". Try rephrasing: name the action and the thing it acts on in other words (for example "send message" instead of "notify").`,
      );
    }
    const results = hits.map((hit) => ({
      name: hit.name,
      description: hit.description,
      input_schema: hit.inputSchema,
      score: Math.round(hit.score * 1000) / 1000,
    }));
    return textResult(JSON.stringify({ query: query.query, search_mode: index.mode, results }, null, 2));
  }

  async function dispatch(request: CallRequest, context: FilterContext): Promise<CallToolResult> {
    const local = request.server === undefined ? localTools.get(request.tool) : undefined;
    if (local) return local.handler({ ...request.arguments }, context);
    const tool = index.get(request.tool);
    const downstream = tool?.server !== undefined ? downstreams.get(tool.server) : undefined;
    if (!tool || !downstream)
      throw new ProxyError('unknown-tool', `Unknown tool "${request.tool}". Use search_tools to find tools.`);
    return downstream.call(tool.toolName, { ...request.arguments });
  }

  async function call(args: unknown, context: FilterContext): Promise<CallToolResult> {
    const parsed = callInput.safeParse(args);
    if (!parsed.success) return inputError('call_tool', parsed.error);
    const indexed = index.get(parsed.data.tool_name);
    const request: CallRequest = {
      tool: parsed.data.tool_name,
      server: indexed?.server,
      arguments: parsed.data.arguments,
      ...(indexed && { inputSchema: indexed.inputSchema }),
    };
    const decided = await runCallPipeline(callFilters, request, { context, reporter });
    if (!decided.allowed) return textResult(decided.reason, true);
    // A filter may have rewritten the tool name: re-resolve what the final request names.
    const target = index.get(decided.value.tool);
    const final: CallRequest = { ...decided.value, server: target?.server };
    const start = process.hrtime.bigint();
    let result: CallToolResult;
    try {
      result = await dispatch(final, context);
    } catch (error) {
      const reason = error instanceof ProxyError ? error.message : `Tool "${final.tool}" failed unexpectedly.`;
      if (!(error instanceof ProxyError)) logger.error(`tool ${final.tool} failed`, error);
      emit({
        ts: new Date().toISOString(),
        session: context.session,
        pipeline: 'call',
        filter: 'dispatch',
        tool: final.tool,
        decision: 'error',
        reason,
        durationUs: Number((process.hrtime.bigint() - start) / 1000n),
      });
      return textResult(reason, true);
    }
    const answered = await runResponsePipeline(responseFilters, result, { request: final, context, reporter });
    return answered.allowed ? answered.value : textResult(answered.reason, true);
  }

  async function load(args: unknown, context: FilterContext): Promise<CallToolResult> {
    const parsed = loadInput.safeParse(args);
    if (!parsed.success) return inputError('load_mcp_server', parsed.error);
    const { server_name: serverName, url } = parsed.data;
    const problem = nameProblem(serverName);
    if (problem) return textResult(`Invalid server name: ${problem}.`, true);
    if (downstreams.get(serverName)?.connected) {
      return textResult(`A server named "${serverName}" is already connected; choose another name.`, true);
    }
    const decided = await runLoadPipeline(loadFilters, { serverName, url }, { context, reporter });
    if (!decided.allowed) return textResult(decided.reason, true);
    try {
      const count = await connectNew(serverName, { kind: 'http', url }, 'runtime');
      return textResult(`Loaded "${serverName}" with ${count} tools. Use search_tools to find them.`);
    } catch (error) {
      const reason = error instanceof ProxyError ? error.message : `Could not load "${serverName}".`;
      return textResult(reason, true);
    }
  }

  return {
    index,
    downstream: (name) => downstreams.get(name),
    async start() {
      const entries = Object.entries(options.servers ?? {});
      const outcomes = await Promise.allSettled(
        entries.map(([name, spec]) => connectNew(name, spec, spec.kind === 'in-process' ? 'in-process' : 'config')),
      );
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
    addServer: (name, spec, admission = 'config') => connectNew(name, spec, admission),
    createServer() {
      const connectionId = randomUUID();
      const server = new Server(
        { name: 'extensible-mcp', version: '0.1.0' },
        { capabilities: { tools: {} }, instructions },
      );
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: metaTools }));
      server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
        const elicitation = server.getClientCapabilities()?.elicitation;
        const context: FilterContext = {
          session: extra.sessionId ?? connectionId,
          ...(elicitation && {
            elicit: (params) => server.elicitInput(params, { relatedRequestId: extra.requestId, timeout: 10 * 60_000 }),
          }),
        };
        const args = request.params.arguments ?? {};
        switch (request.params.name) {
          case 'search_tools':
            return search(args, context);
          case 'call_tool':
            return call(args, context);
          case 'load_mcp_server':
            return load(args, context);
          default:
            return textResult(
              `Unknown tool "${request.params.name}". This server offers search_tools, call_tool and load_mcp_server.`,
              true,
            );
        }
      });
      return server;
    },
    async close() {
      await Promise.allSettled([...downstreams.values()].map((downstream) => downstream.close()));
      if (ownsEmbedder) await (await embedder)?.close?.();
    },
  };
}
