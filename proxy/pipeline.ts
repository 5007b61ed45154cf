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

/** Where a pipeline run reports: the event hook and the log for filter faults. */
export interface PipelineReporter {
  readonly emit: EventHook;
  /** Receives a filter's thrown error; the model only ever sees a generic reason. */
  readonly onFilterError: (filter: string, error: unknown) => void;
}

/** The outcome of the call, response or load pipeline. */
export type PipelineOutcome<T> =
  | { readonly allowed: true; readonly value: T }
  | { readonly allowed: false; readonly reason: string };

type Verdict<T> =
  | { readonly decision: 'allow'; readonly value?: T; readonly flag?: string }
  | { readonly decision: 'deny'; readonly reason: string };

interface ChainOptions<T> {
  readonly pipeline: PipelineName;
  readonly steps: readonly ((value: T) => Verdict<T> | Promise<Verdict<T>>)[];
  readonly names: readonly string[];
  readonly subject: (value: T) => string;
  readonly context: FilterContext;
  readonly reporter: PipelineReporter;
}

function elapsedUs(start: bigint): number {
  return Number((process.hrtime.bigint() - start) / 1000n);
}

/**
 * The one place that knows ordering and short-circuit: runs each step in order, passes a
 * rewritten value to the next step, stops at the first deny, and treats a throwing step as a
 * deny (fail closed) whose raw error is logged, never shown.
 */
async function runChain<T>(initial: T, options: ChainOptions<T>): Promise<PipelineOutcome<T>> {
  const { pipeline, context, reporter } = options;
  let value = initial;
  for (const [index, step] of options.steps.entries()) {
    const filter = options.names[index] || 'anonymous';
    const event = { session: context.session, pipeline, filter, tool: options.subject(value) };
    const start = process.hrtime.bigint();
    let verdict: Verdict<T>;
    try {
      verdict = await step(value);
    } catch (error) {
      reporter.onFilterError(filter, error);
      const reason = `Refused: the ${filter} check failed, so the request was blocked (fail closed).`;
      report(reporter, { ...event, decision: 'error', reason, durationUs: elapsedUs(start) });
      return { allowed: false, reason };
    }
    const durationUs = elapsedUs(start);
    if (verdict.decision === 'deny') {
      report(reporter, { ...event, decision: 'deny', reason: verdict.reason, durationUs });
      return { allowed: false, reason: verdict.reason };
    }
    const rewritten = verdict.value !== undefined && verdict.value !== value;
    const decision = verdict.flag !== undefined ? 'flag' : rewritten ? 'rewrite' : 'allow';
    report(reporter, { ...event, decision, ...(verdict.flag !== undefined && { reason: verdict.flag }), durationUs });
    if (rewritten && verdict.value !== undefined) value = verdict.value;
  }
  return { allowed: true, value };
}

function report(reporter: PipelineReporter, event: Omit<ProxyEvent, 'ts'>): void {
  try {
    reporter.emit({ ts: new Date().toISOString(), ...event });
  } catch (error) {
    reporter.onFilterError('event-hook', error);
  }
}

/** Runs the call pipeline (SPEC §3.6): first deny wins; rewritten calls reach the next filter. */
export function runCallPipeline(
  filters: readonly CallFilter[],
  request: CallRequest,
  options: { context: FilterContext; reporter: PipelineReporter },
): Promise<PipelineOutcome<CallRequest>> {
  return runChain(request, {
    ...options,
    pipeline: 'call',
    names: filters.map((filter) => filter.name),
    subject: (value) => value.tool,
    steps: filters.map((filter) => async (value: CallRequest): Promise<Verdict<CallRequest>> => {
      const verdict = await filter(value, options.context);
      return verdict.decision === 'deny'
        ? verdict
        : { decision: 'allow', ...(verdict.request && { value: verdict.request }) };
    }),
  });
}

/** Runs the response pipeline on an allowed call's result. */
export function runResponsePipeline(
  filters: readonly ResponseFilter[],
  result: CallToolResult,
  options: { request: CallRequest; context: FilterContext; reporter: PipelineReporter },
): Promise<PipelineOutcome<CallToolResult>> {
  return runChain(result, {
    ...options,
    pipeline: 'response',
    names: filters.map((filter) => filter.name),
    subject: () => options.request.tool,
    steps: filters.map((filter) => async (value: CallToolResult): Promise<Verdict<CallToolResult>> => {
      const verdict = await filter(value, options.request, options.context);
      if (verdict.decision === 'deny') return verdict;
      return {
        decision: 'allow',
        ...(verdict.result && { value: verdict.result }),
        ...(verdict.flag !== undefined && { flag: verdict.flag }),
      };
    }),
  });
}

/** Runs the load pipeline before any connection is made. */
export function runLoadPipeline(
  filters: readonly LoadFilter[],
  request: LoadRequest,
  options: { context: FilterContext; reporter: PipelineReporter },
): Promise<PipelineOutcome<LoadRequest>> {
  return runChain(request, {
    ...options,
    pipeline: 'load',
    names: filters.map((filter) => filter.name),
    subject: (value) => value.serverName,
    steps: filters.map((filter) => (value: LoadRequest) => filter(value, options.context)),
  });
}

/**
 * Runs the search pipeline over the full ranked list, before the top-k cut, so a hidden tool
 * never displaces a visible one. A throwing filter empties the result (fail closed).
 */
export async function runSearchPipeline(
  filters: readonly SearchFilter[],
  hits: readonly SearchHit[],
  options: { query: SearchQuery; context: FilterContext; reporter: PipelineReporter },
): Promise<readonly SearchHit[]> {
  let current = hits;
  for (const filter of filters) {
    const name = filter.name || 'anonymous';
    const event = {
      session: options.context.session,
      pipeline: 'search' as const,
      filter: name,
      tool: options.query.query,
    };
    const start = process.hrtime.bigint();
    try {
      const next = await filter(current, options.query, options.context);
      const reason = `kept ${next.length} of ${current.length}`;
      report(options.reporter, {
        ...event,
        decision: next === current ? 'allow' : 'rewrite',
        reason,
        durationUs: elapsedUs(start),
      });
      current = next;
    } catch (error) {
      options.reporter.onFilterError(name, error);
      report(options.reporter, {
        ...event,
        decision: 'error',
        reason: `the ${name} filter failed`,
        durationUs: elapsedUs(start),
      });
      return [];
    }
  }
  return current;
}
