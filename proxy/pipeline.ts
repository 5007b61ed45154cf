import type { CallToolResult, ElicitRequest, ElicitResult, Tool } from '@modelcontextprotocol/sdk/types.js';

/** Who is asking: the MCP session a request arrived on. Every filter receives it. */
export interface FilterContext {
  /** The MCP session id (the discovery gate and evidence are scoped to it). */
  readonly session: string;
  /**
   * Asks the human through the client's form elicitation, tied to the request being handled.
   * Absent when the client did not declare the elicitation capability.
   */
  readonly elicit?: (params: ElicitRequest['params']) => Promise<ElicitResult>;
}

/** A tool as the index and the search pipeline see it. */
export interface SearchHit {
  /** Qualified name: `{server}__{tool}` for downstream tools, the bare name for local tools. */
  readonly name: string;
  /** The downstream server, or `undefined` for a local tool. */
  readonly server: string | undefined;
  readonly description: string;
  readonly inputSchema: Tool['inputSchema'];
  /** Fused rank score in (0, 1], higher is better. */
  readonly score: number;
  /** Relevance in [0, 1] that `similarity_threshold` compares against (cosine when the model is ready, normalised BM25 otherwise). */
  readonly similarity: number;
}

/** What `search_tools` was asked. */
export interface SearchQuery {
  readonly query: string;
  readonly topK: number;
}

/** A search filter narrows or rewrites the ranked list before the top-k cut. */
export type SearchFilter = (
  hits: readonly SearchHit[],
  query: SearchQuery,
  context: FilterContext,
) => readonly SearchHit[] | Promise<readonly SearchHit[]>;

/** A tool call on its way through the call pipeline. */
export interface CallRequest {
  /** Qualified tool name as the model gave it. */
  readonly tool: string;
  /** The downstream server, or `undefined` for a local tool. */
  readonly server: string | undefined;
  readonly arguments: Readonly<Record<string, unknown>>;
  /** The tool's input schema as indexed (absent for an unknown tool). */
  readonly inputSchema?: Tool['inputSchema'];
}

/** A call filter's verdict: allow (optionally rewriting the call for the next filter) or deny with a reason the model can act on. */
export type CallVerdict =
  | { readonly decision: 'allow'; readonly request?: CallRequest }
  | { readonly decision: 'deny'; readonly reason: string };

/** A call filter decides whether a call may proceed. The first deny stops the chain. */
export type CallFilter = (request: CallRequest, context: FilterContext) => CallVerdict | Promise<CallVerdict>;

/** A response filter's verdict: pass (optionally rewritten and/or flagged) or deny. */
export type ResponseVerdict =
  | { readonly decision: 'allow'; readonly result?: CallToolResult; readonly flag?: string }
  | { readonly decision: 'deny'; readonly reason: string };

/** A response filter sees what an allowed call returned before the model does. */
export type ResponseFilter = (
  result: CallToolResult,
  request: CallRequest,
  context: FilterContext,
) => ResponseVerdict | Promise<ResponseVerdict>;

/** A `load_mcp_server` request, seen before any connection is made. */
export interface LoadRequest {
  readonly serverName: string;
  readonly url: string;
}

/** A load filter's verdict. */
export type LoadVerdict = { readonly decision: 'allow' } | { readonly decision: 'deny'; readonly reason: string };

/** A load filter may refuse a runtime server load. */
export type LoadFilter = (request: LoadRequest, context: FilterContext) => LoadVerdict | Promise<LoadVerdict>;

/** The four pipelines a proxy runs, each an ordered list of filters. */
export type PipelineName = 'search' | 'call' | 'response' | 'load';

/** One structured event per decision (SPEC §3.6). */
export interface ProxyEvent {
  readonly ts: string;
  readonly session: string;
  readonly pipeline: PipelineName;
  /** The filter's function name (`accessControl`), or the proxy step (`dispatch`). */
  readonly filter: string;
  /** The tool, the query (search) or the server name (load) the decision was about. */
  readonly tool: string;
  readonly decision: 'allow' | 'deny' | 'rewrite' | 'flag' | 'error';
  readonly reason?: string;
  readonly durationUs: number;
}

/** Receives every decision the proxy makes. It must not throw; if it does, the error is logged and ignored. */
export type EventHook = (event: ProxyEvent) => void;
