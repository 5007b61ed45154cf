import type {
  CallToolResult,
  ClientCapabilities,
  ElicitRequestFormParams,
  ElicitResult,
  Result,
  Tool,
  Transport,
} from '@modelcontextprotocol/server';
import type { DefinitionChange, HoldReason } from '../pins/types';
import type { Reconfiguration, ReconfigureReport } from './create-gateway';

/**
 * The gateway's public contract (SPEC §3.12). Every face (the search-mode MCP server, the
 * transparent MCP server, the Streamable HTTP handler, the in-memory client) is a thin adapter
 * over a {@link Gateway}; identity, payments and the app build against these types only.
 */

/** How a server came to be admitted: facts the gateway controls, never the server's own claims. */
export type Admission = 'config' | 'runtime' | 'in-process';

/** What the gateway vouches for about a downstream server (SPEC §4.8): routing reads only these. */
export interface ServerFacts {
  readonly name: string;
  /** The Streamable HTTP endpoint it was admitted at; absent for stdio and in-process servers. */
  readonly url?: string;
  readonly admission: Admission;
}

/**
 * Who is calling (SPEC §3.5). Every face names one from what it can prove, never from a header or
 * an argument: `user:<login>` on stdio, `token:<name>` for a bearer token, `anonymous` on an HTTP
 * face without tokens, `chat:<session>` in the app's chat, `operator` for the host's own calls.
 */
export interface Principal {
  readonly id: string;
  /** The household role, when the host knows one (a signed-in member). */
  readonly role?: string;
}

/**
 * What carries a discovery scope (SPEC §3.5, docs/protocol.md): a session (a 2025 MCP session, an
 * in-process connection, the app's chat session), or, for a sessionless client, the handle that
 * `search_tools` returned and the call passes back. Either is checked together with the principal.
 */
export type DiscoveryScope =
  | { readonly kind: 'session'; readonly id: string }
  /** A sessionless (2026-07-28) client; `handle` is absent until its first search returns one. */
  | { readonly kind: 'handle'; readonly handle?: string };

/**
 * A URL-mode ask (SPEC §3.12): the person is sent to pages of the host's own (the approval
 * windows) and acts there. Nothing they do there travels through the client, which only opens the
 * pages; `settled` is how the asker learns it happened.
 */
export interface UrlElicitation {
  readonly mode: 'url';
  /**
   * Names what is asked (`approval/<id>`), stable across rounds: a retry's answers count only for
   * the same ask, and a request state carries it.
   */
  readonly id: string;
  /** The pages to visit, by a short key (`child`, `parent`): one URL elicitation each. */
  readonly pages: Readonly<Record<string, { readonly message: string; readonly url: string }>>;
  /**
   * Waits at most `timeoutMs` for what the person does on the pages: true once it is decided (done,
   * or past doing), false while it is still waiting. Reads only; never changes what it waits for.
   */
  readonly settled: (wait: { readonly timeoutMs: number; readonly signal: AbortSignal }) => Promise<boolean>;
}

/**
 * Asks the human, tied by the face to the request being handled: through a form, or (a
 * {@link UrlElicitation}) by sending them to pages. A URL ask resolves `accept` once `settled` says
 * so; `decline` or `cancel` when the client would not open the pages, or cannot take URL
 * elicitation at all.
 */
export type Elicit = (params: ElicitRequestFormParams | UrlElicitation) => Promise<ElicitResult>;

/**
 * Sends a server→client request (`elicitation/create`, `sampling/createMessage`, `roots/list`,
 * `ping`) to the session's client, tied by the face to the request being handled (SPEC §3.10).
 */
export type RelayRequest = (
  request: { readonly method: string; readonly params?: Record<string, unknown> },
  options: { readonly signal?: AbortSignal; readonly timeout?: number },
) => Promise<Result>;

/** The context every gateway operation and every filter receives. */
export interface CallContext {
  /** Who is calling: every scope has an owner. */
  readonly principal: Principal;
  /** The discovery scope: what `search` records into and the discovery gate checks (with the principal). */
  readonly scope: DiscoveryScope;
  /** Present when the client declared form elicitation. */
  readonly elicit?: Elicit;
  /**
   * On the retry of a URL ask (a 2026-07-28 client's), the ask's `id` as its signed request state
   * names it (`call-approval/<id>`). Read only to answer how that ask ended (declined, expired)
   * when asking afresh would hide it; never evidence that anything was approved.
   */
  readonly retryOf?: string;
  /** Aborts the operation (client cancelled, connection gone). */
  readonly signal?: AbortSignal;
  /**
   * Reaches the session's client while this call runs: a downstream's own requests made during the
   * call go there (SPEC §3.10). Absent when the face cannot send requests to its client.
   */
  readonly relay?: RelayRequest;
  /** What the session's client declared at `initialize` (which relayed requests it can answer). */
  readonly clientCapabilities?: ClientCapabilities;
  /**
   * How "discovered" is supplied (SPEC §3.5): absent, what {@link Gateway.search} recorded in
   * `scope`; a transparent face's upstream connection, what that connection lists now. The gate
   * itself has no off switch.
   */
  readonly listing?: ListingConnection;
}

/** A tool as search ranks it and the search pipeline sees it, stamped by the gateway. */
export interface SearchHit {
  /** Qualified name: `{server}__{tool}` for downstream tools, the bare name for local tools. */
  readonly name: string;
  /** The tool's own name on its server (the bare name for local tools). */
  readonly toolName: string;
  /** The server's admission facts, `undefined` for a local tool. */
  readonly server: ServerFacts | undefined;
  readonly description: string;
  readonly inputSchema: Tool['inputSchema'];
  /** Fused rank score in (0, 1], higher is better. */
  readonly score: number;
  /** Relevance in [0, 1] that `similarity_threshold` compares against. */
  readonly similarity: number;
}

/** What a search asks. */
export interface SearchQuery {
  readonly query: string;
  /** Already clamped to 1..50 by the gateway. */
  readonly topK: number;
}

/** How search currently ranks: lexical while the model loads or when it is unavailable. */
export type SearchMode = 'loading' | 'hybrid' | 'lexical';

/** What {@link Gateway.search} returns; every hit is now discovered in the caller's scope. */
export interface SearchResult {
  readonly mode: SearchMode;
  readonly hits: readonly SearchHit[];
  /** For a handle scope: the handle the caller passes back to call what it found (docs/protocol.md). */
  readonly handle?: string;
  /** Servers still connecting: their tools are not searchable yet (search again shortly). */
  readonly connecting: readonly string[];
}

/** A call as the caller makes it. */
export interface CallInput {
  /** The name the session discovered: qualified in search mode, the bare upstream name in transparent mode. */
  readonly tool: string;
  readonly arguments: Readonly<Record<string, unknown>>;
}

/**
 * A call on its way through the call pipeline, stamped by the gateway from what it owns (the
 * index, the registry, the governing bundle), never from the caller's say-so.
 */
export interface CallRequest {
  /** The name the session discovered (see {@link CallInput.tool}). */
  readonly tool: string;
  /** The tool's own name on its server; `undefined` when the gateway knows no such tool. */
  readonly toolName: string | undefined;
  /** The server's admission facts; `undefined` for a local tool or an unknown name. */
  readonly server: ServerFacts | undefined;
  readonly arguments: Readonly<Record<string, unknown>>;
  /** The tool's input schema as indexed (absent for an unknown tool). */
  readonly inputSchema?: Tool['inputSchema'];
  /** Whether the tool declares an output schema (a blocked result must then be text). */
  readonly hasOutputSchema: boolean;
  /**
   * The credential fields of the policy bundle that governs this server (SPEC §4.5): elicitation
   * never asks for them, and the policy filter strips them. Empty when ungoverned.
   */
  readonly credentialFields: readonly string[];
}

/** How a dispatched call ended, as a wrapping call filter sees it. */
export type DispatchOutcome =
  /** The tool answered (its result may itself be an `isError` result). */
  | { readonly status: 'completed'; readonly result: CallToolResult }
  /** The call certainly did not run: refused before it was sent, or the server reported a failure. */
  | { readonly status: 'failed'; readonly reason: string }
  /** The call may have run (timeout, lost connection): never replayed, reported as outcome unknown. */
  | { readonly status: 'unknown'; readonly reason: string };

/** Runs the rest of the call: the later filters' wraps, then the downstream or local tool. Call it at most once. */
export type Dispatch = () => Promise<DispatchOutcome>;

/**
 * A call filter's verdict. `allow` may rewrite the request for the next filter and may wrap
 * dispatch to see how the call ended (e.g. commit evidence only after settlement); `deny` stops
 * the chain with a reason the model can act on, or with a whole result to show instead.
 */
export type CallVerdict =
  | {
      readonly decision: 'allow';
      readonly request?: CallRequest;
      readonly wrap?: (dispatch: Dispatch) => Promise<DispatchOutcome>;
    }
  | { readonly decision: 'deny'; readonly reason: string; readonly result?: CallToolResult };

/** A call filter decides whether a call may proceed. It returns a verdict; a filter that throws denies. */
export type CallFilter = (request: CallRequest, context: CallContext) => CallVerdict | Promise<CallVerdict>;

/** A search filter narrows or rewrites the ranked list before the top-k cut. */
export type SearchFilter = (
  hits: readonly SearchHit[],
  query: SearchQuery,
  context: CallContext,
) => readonly SearchHit[] | Promise<readonly SearchHit[]>;

/** A response filter's verdict: pass (optionally rewritten and/or flagged) or deny. */
export type ResponseVerdict =
  | { readonly decision: 'allow'; readonly result?: CallToolResult; readonly flag?: string }
  | { readonly decision: 'deny'; readonly reason: string };

/** A response filter sees what an allowed call returned before the model does. */
export type ResponseFilter = (
  result: CallToolResult,
  request: CallRequest,
  context: CallContext,
) => ResponseVerdict | Promise<ResponseVerdict>;

/** A `load_mcp_server` request, seen before any connection is made. */
export interface LoadRequest {
  readonly serverName: string;
  readonly url: string;
}

/** A load filter's verdict. */
export type LoadVerdict = { readonly decision: 'allow' } | { readonly decision: 'deny'; readonly reason: string };

/** A load filter may refuse a runtime server load. */
export type LoadFilter = (request: LoadRequest, context: CallContext) => LoadVerdict | Promise<LoadVerdict>;

/** What a load did: the tools it indexed, or why it was refused. */
export type LoadResult =
  | { readonly loaded: true; readonly server: string; readonly tools: number }
  | { readonly loaded: false; readonly reason: string };

/**
 * The four pipelines, each an ordered list of filters, and `listing`: the pin check every server's
 * listing goes through before the index (SPEC §3.13).
 */
export type PipelineName = 'search' | 'call' | 'response' | 'load' | 'listing';

/** What a `tool-held` event carries (SPEC §3.13): a listed tool kept out of the index for the operator's review. */
export interface ToolHeldFacts {
  readonly server: string;
  /** The tool's name as the server listed it. */
  readonly tool: string;
  readonly reason: HoldReason;
  /** The field-level diff against the pin: empty for a `new` tool. */
  readonly diff: readonly DefinitionChange[];
  /** The pinned hash (absent for a `new` tool) and the listed one. */
  readonly hashes: { readonly pinned?: string; readonly listed: string };
}

/** One structured event per decision (SPEC §3.6). */
export interface ProxyEvent {
  readonly ts: string;
  /** The caller's principal id. */
  readonly principal: string;
  /** A digest of the caller's discovery scope ({@link scopeDigest}): never a raw session id or handle. */
  readonly scope: string;
  readonly pipeline: PipelineName;
  /** The filter's function name (`accessControl`), or the gateway step (`dispatch`). */
  readonly filter: string;
  /** The tool, the query (search) or the server name (load) the decision was about. */
  readonly tool: string;
  /** `ask`: the operation paused to ask the person (SPEC §3.12); its retry is decided afresh. */
  readonly decision: 'allow' | 'deny' | 'rewrite' | 'flag' | 'ask' | 'error';
  readonly reason?: string;
  readonly durationUs: number;
  /** Set on a `tool-held` event (pipeline `listing`): which tool was held, why, and what moved. */
  readonly held?: ToolHeldFacts;
}

/** Receives every decision. It must not throw; if it does, the error is logged and ignored. */
export type EventHook = (event: ProxyEvent) => void;

/**
 * The upstream connection a transparent face hands the gateway in each call's context (SPEC §3.5,
 * §3.10): what may be called is what it lists now, and the call goes to it.
 */
export interface ListingConnection {
  readonly facts: ServerFacts;
  /**
   * The upstream's current definition of `tool`, or `undefined` when it does not list it now: the
   * stamp filters read, and what the discovery gate allows. No earlier listing by the client is needed.
   */
  find(tool: string): Promise<Tool | undefined>;
  call(tool: string, args: Record<string, unknown>, context: CallContext): Promise<CallToolResult>;
  /** The refusal of a call to `tool` while this listing holds it for review (SPEC §3.13); else `undefined`. */
  held?(tool: string): string | undefined;
}

/** What {@link Gateway.admit} connected. */
export interface AdmitReport {
  readonly server: string;
  readonly tools: number;
  /** The MCP protocol version the connection negotiated (`2026-07-28`, `2025-11-25`, …). */
  readonly protocolVersion?: string;
}

/** What starting the configured servers managed to connect. */
export interface StartReport {
  readonly connected: readonly string[];
  readonly failed: readonly { readonly name: string; readonly reason: string }[];
}

/**
 * The transport-agnostic gateway: it owns the downstream registry, the index, the four ordered
 * pipelines and dispatch. It exposes only what the model may reach (`search`, `call`, `load`)
 * plus operator-only `admit`, `start` and `close`; no API hands out a connection or the index.
 */
export interface Gateway {
  /** Ranks, filters and cuts; every returned tool becomes discovered in `context.scope`. */
  search(query: { readonly query: string; readonly topK?: number }, context: CallContext): Promise<SearchResult>;
  /** Call pipeline → dispatch (never replayed) → response pipeline. Refusals are `isError` results. */
  call(input: CallInput, context: CallContext): Promise<CallToolResult>;
  /** Load pipeline → anonymous unless configured (SPEC §3.9) → index. */
  load(request: LoadRequest, context: CallContext): Promise<LoadResult>;
  /** Operator-only: admits a server (config reload, `add-server`). Never reachable from a model. */
  admit(name: string, spec: DownstreamSpec): Promise<AdmitReport>;
  /** Connects every configured server; unreachable ones are reported, not fatal. */
  start(): Promise<StartReport>;
  /**
   * Operator-only (SIGHUP): rebuilds the pipelines from new filter settings, admits new servers,
   * re-points servers whose spec changed and drops removed ones. Runtime loads are untouched; a
   * retired connection is closed once the calls in flight on it have ended (never cut mid-call).
   * Never reachable from a model.
   */
  reconfigure(next: Reconfiguration): Promise<ReconfigureReport>;
  /**
   * Operator-only (SIGHUP after `pins accept`/`reject`): checks every connected server's last
   * listing against the pin store as it is now (SPEC §3.13); `reconfigure` does it too. Nothing
   * without a pin store. Never reachable from a model.
   */
  readmitPins(): Promise<void>;
  /** How search ranks right now. */
  readonly searchMode: SearchMode;
  /** Resolves once the model has loaded (or failed to) and every indexed tool is embedded. */
  ready(): Promise<SearchMode>;
  close(): Promise<void>;
}

/** An MCP server object that can be linked in-process (`McpServer` or the low-level `Server`). */
export interface LinkableServer {
  connect(transport: Transport): Promise<void>;
}

/**
 * Which MCP protocol version the proxy speaks to a downstream (issue 31, docs/protocol.md): a
 * pinned version, connected to in that version or not at all, or `auto`, which asks the server
 * (`server/discover`) and speaks 2026-07-28 when it offers it, else 2025-11-25. Absent means `auto`.
 */
export type DownstreamProtocol = '2026-07-28' | '2025-11-25' | 'auto';

/** How to reach a downstream server. */
export type DownstreamSpec =
  | {
      readonly kind: 'stdio';
      readonly command: string;
      readonly args?: readonly string[];
      readonly env?: Readonly<Record<string, string>>;
      readonly protocol?: DownstreamProtocol;
    }
  | { readonly kind: 'http'; readonly url: string; readonly protocol?: DownstreamProtocol }
  | { readonly kind: 'in-process'; readonly server: LinkableServer };
