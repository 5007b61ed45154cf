import type { CallToolResult } from '@modelcontextprotocol/server';
import { scopeDigest } from './discovery-scope';
import { isInputRequired } from './input-required';
import type {
  CallContext,
  CallFilter,
  CallRequest,
  CallVerdict,
  Dispatch,
  DispatchOutcome,
  EventHook,
  LoadFilter,
  LoadRequest,
  PipelineName,
  ProxyEvent,
  ResponseFilter,
  SearchFilter,
  SearchHit,
  SearchQuery,
} from './types';

/** Where a pipeline run reports: the event hook and the log for filter faults. */
export interface PipelineReporter {
  readonly emit: EventHook;
  /** Receives a filter's thrown error; the model only ever sees a generic reason. */
  readonly onFilterError: (filter: string, error: unknown) => void;
}

/** The outcome of the call, response or load pipeline. */
export type PipelineOutcome<T> =
  | { readonly allowed: true; readonly value: T }
  | { readonly allowed: false; readonly reason: string; readonly result?: CallToolResult };

/** The call pipeline's outcome: on allow, the final request and dispatch wrapped by every filter that asked to. */
export type CallOutcome =
  | {
      readonly allowed: true;
      readonly value: CallRequest;
      readonly wrap: (dispatch: Dispatch) => Promise<DispatchOutcome>;
    }
  | { readonly allowed: false; readonly reason: string; readonly result?: CallToolResult };

type Verdict<T> =
  | { readonly decision: 'allow'; readonly value?: T; readonly flag?: string }
  | { readonly decision: 'deny'; readonly reason: string; readonly result?: CallToolResult };

interface ChainOptions<T> {
  readonly pipeline: PipelineName;
  readonly steps: readonly ((value: T) => Verdict<T> | Promise<Verdict<T>>)[];
  readonly names: readonly string[];
  readonly subject: (value: T) => string;
  readonly context: CallContext;
  readonly reporter: PipelineReporter;
}

function elapsedUs(start: bigint): number {
  return Number((process.hrtime.bigint() - start) / 1000n);
}

/**
 * The one place that knows ordering and short-circuit: runs each step in order, passes a
 * rewritten value to the next step, stops at the first deny, and treats a throwing step as a
 * deny (fail closed) whose raw error is logged, never shown. A step that must ask the person
 * first ({@link isInputRequired}) stops the chain for this round.
 */
async function runChain<T>(initial: T, options: ChainOptions<T>): Promise<PipelineOutcome<T>> {
  const { pipeline, context, reporter } = options;
  let value = initial;
  for (const [index, step] of options.steps.entries()) {
    const filter = options.names[index] || 'anonymous';
    const event = {
      principal: context.principal.id,
      scope: scopeDigest(context.principal, context.scope),
      pipeline,
      filter,
      tool: options.subject(value),
    };
    const start = process.hrtime.bigint();
    let verdict: Verdict<T>;
    try {
      verdict = await step(value);
    } catch (error) {
      // A question for the person is no fault: the face asks it, and the retry runs the chain again.
      if (isInputRequired(error)) {
        report(reporter, {
          ...event,
          decision: 'ask',
          reason: 'asked the client for input',
          durationUs: elapsedUs(start),
        });
        throw error;
      }
      reporter.onFilterError(filter, error);
      const reason = `Refused: the ${filter} check failed, so the request was blocked (fail closed).`;
      report(reporter, { ...event, decision: 'error', reason, durationUs: elapsedUs(start) });
      return { allowed: false, reason };
    }
    const durationUs = elapsedUs(start);
    if (verdict.decision === 'deny') {
      report(reporter, { ...event, decision: 'deny', reason: verdict.reason, durationUs });
      return { allowed: false, reason: verdict.reason, ...(verdict.result && { result: verdict.result }) };
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

/**
 * Runs the call pipeline (SPEC §3.6): first deny wins; rewritten calls reach the next filter.
 * Filters that wrap dispatch are composed outermost-first, so the earliest filter sees the final
 * outcome last, the way middleware unwinds.
 */
export async function runCallPipeline(
  filters: readonly CallFilter[],
  request: CallRequest,
  options: { context: CallContext; reporter: PipelineReporter },
): Promise<CallOutcome> {
  const wraps: { filter: string; wrap: (dispatch: Dispatch) => Promise<DispatchOutcome> }[] = [];
  const outcome = await runChain(request, {
    ...options,
    pipeline: 'call',
    names: filters.map((filter) => filter.name),
    subject: (value) => value.tool,
    steps: filters.map((filter) => async (value: CallRequest): Promise<Verdict<CallRequest>> => {
      const verdict: CallVerdict = await filter(value, options.context);
      if (verdict.decision === 'deny') return verdict;
      if (verdict.wrap) wraps.push({ filter: filter.name || 'anonymous', wrap: verdict.wrap });
      return { decision: 'allow', ...(verdict.request && { value: verdict.request }) };
    }),
  });
  if (!outcome.allowed) return outcome;
  return {
    allowed: true,
    value: outcome.value,
    wrap: (dispatch) =>
      wraps.reduceRight<Dispatch>(
        (inner, { filter, wrap }) => guarded(filter, wrap, inner, options.reporter),
        dispatch,
      )(),
  };
}

/**
 * One wrap around `inner`: `inner` runs at most once, and a wrap that throws fails closed: before
 * dispatch the call is refused; after it the outcome is withheld as unknown (the call may have run).
 */
function guarded(
  filter: string,
  wrap: (dispatch: Dispatch) => Promise<DispatchOutcome>,
  inner: Dispatch,
  reporter: PipelineReporter,
): Dispatch {
  return async () => {
    let dispatched: Promise<DispatchOutcome> | undefined;
    const once: Dispatch = () => {
      dispatched ??= inner();
      return dispatched;
    };
    try {
      return await wrap(once);
    } catch (error) {
      // The tool asked the person: no outcome yet, so no fault; the retry runs the wraps again.
      if (isInputRequired(error)) throw error;
      reporter.onFilterError(filter, error);
      return dispatched === undefined
        ? { status: 'failed', reason: `Refused: the ${filter} check failed, so the request was blocked (fail closed).` }
        : { status: 'unknown', reason: `The ${filter} check failed after the call was sent.` };
    }
  };
}

/** Runs the response pipeline on an allowed call's result. */
export function runResponsePipeline(
  filters: readonly ResponseFilter[],
  result: CallToolResult,
  options: { request: CallRequest; context: CallContext; reporter: PipelineReporter },
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
  options: { context: CallContext; reporter: PipelineReporter },
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
  options: { query: SearchQuery; context: CallContext; reporter: PipelineReporter },
): Promise<readonly SearchHit[]> {
  let current = hits;
  for (const filter of filters) {
    const name = filter.name || 'anonymous';
    const event = {
      principal: options.context.principal.id,
      scope: scopeDigest(options.context.principal, options.context.scope),
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
