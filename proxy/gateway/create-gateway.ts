import type { CallToolResult, Tool } from '@modelcontextprotocol/server';
import type { CredentialLookup } from '../credentials/credentialed-fetch';
import { type AccessControlOptions, accessControl, accessPredicate } from '../filters/access-control';
import { type ApprovalRequiredOptions, approvalRequired } from '../filters/approval-required';
import { type LoadControlOptions, loadControl } from '../filters/load-control';
import type { LoadResolver } from '../filters/safe-load';
import { similarityThreshold } from '../filters/similarity-threshold';
import type { PinStore } from '../pins/types';
import { bundleRouter, type RouteResolver } from '../policy/bundle-router';
import type { PolicyBundle } from '../policy/load-bundle';
import { policyAugmenter } from '../policy/policy-augmenter';
import { discoveryGate, listingGate } from './discovery-gate';
import { scopeDigest } from './discovery-scope';
import { type DiscoveryStore, memoryDiscoveryStore } from './discovery-store';
import { createDispatch, type Dispatch, defaultConnectTimeoutMs } from './dispatch';
import { createLoad } from './load';
import { createPinAdmission, type PinAdmission } from './pin-admission';
import { createRegistry } from './registry';
import { type PipelineReporter, runCallPipeline, runResponsePipeline } from './run-pipelines';
import { createSearch, type EmbeddingOptions, type Search } from './search';
import { createStamping } from './stamping';
import type {
  CallContext,
  CallFilter,
  DownstreamSpec,
  EventHook,
  Gateway,
  LoadFilter,
  ResponseFilter,
  SearchFilter,
} from './types';

export { defaultConnectTimeoutMs, outcomeMetaKey } from './dispatch';
export { clampTopK, type EmbeddingOptions } from './search';

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
  /**
   * `filters.elicit_missing`: the elicitation filter, which asks for missing required arguments
   * (runs after the rego policy and before the extra call filters).
   */
  readonly elicitation?: CallFilter;
  /**
   * `filters.approval_required` (docs/human-authority.md): runs after the extra call filters, so
   * the hash is over the arguments as they are forwarded. Without a gate every matching call is refused.
   */
  readonly approvalRequired?: ApprovalRequiredOptions;
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
  /**
   * Where tool definitions are pinned (SPEC §3.13, docs/pinning.md). When set, every listing of
   * every server (configured or loaded at runtime) is checked against it before the index, and a
   * changed or new definition is held until the operator accepts it. The owner closes it.
   */
  readonly pinStore?: PinStore;
  /** The operator's pins command as a held tool's refusal and log line name it; default `extensible-mcp pins`. */
  readonly pinReviewCommand?: string;
  /**
   * The face's listing connections may hold tools (transparent mode's pinning, SPEC §3.13): a call
   * to a tool its `ListingConnection.held` names is refused with that review message.
   */
  readonly listingHolds?: boolean;
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
  'similarityThreshold' | 'accessControl' | 'loadControl' | 'regoPolicy' | 'elicitation' | 'approvalRequired'
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

const stderrLogger: ProxyLogger = {
  info: (line) => process.stderr.write(`[extensible-mcp] ${line}\n`),
  error: (line, error) =>
    process.stderr.write(`[extensible-mcp] ${line}${error instanceof Error ? `: ${error.message}` : ''}\n`),
};

function textResult(text: string, isError = false): CallToolResult {
  return { content: [{ type: 'text', text }], ...(isError && { isError: true }) };
}

function elapsedUs(start: bigint): number {
  return Number((process.hrtime.bigint() - start) / 1000n);
}

/**
 * Builds the gateway (SPEC §3.12) from its five parts: the registry (downstreams, local tools,
 * admission), search (the hybrid index and the discoveries it records), stamping, dispatch and
 * load, with the four pipelines in their fixed order (assembled here and nowhere else) and the one
 * call path that runs them. The discovery gate is part of the call pipeline and cannot be
 * configured away; local tools go through the same pipeline as downstream tools. The face says how
 * "discovered" is supplied (SPEC §3.5): by default what `search` recorded in the caller's scope;
 * with a `listing` connection in the context (transparent mode), what that connection lists now.
 */
export function createGateway(options: GatewayOptions = {}): Gateway {
  const logger = options.logger ?? stderrLogger;
  const log = (line: string) => logger.info(line);
  const store = options.discoveryStore ?? memoryDiscoveryStore();
  const emit: EventHook = options.onEvent ?? (() => undefined);
  const reporter: PipelineReporter = {
    emit,
    onFilterError: (filter, error) => logger.error(`filter ${filter} failed`, error),
  };

  // The registry tells the index what each server lists and asks dispatch how to reach it; both
  // are built below, and neither is asked before the first admission. A bad local tool name throws
  // here, before anything else exists.
  const registry = createRegistry({
    log,
    ...(options.servers && { servers: options.servers }),
    ...(options.localTools && { localTools: options.localTools }),
    ...(options.startGraceMs !== undefined && { startGraceMs: options.startGraceMs }),
    reach: (name, spec) => dispatch.reach(name, spec),
    catalog: {
      // The raw listing: pins are checked before anything (an augmenter, stamping) touches it.
      list: (server, tools) => (pins ? pins.list(server, tools) : search.list(server, tools)),
      remove: (server) => {
        pins?.remove(server);
        search.remove(server);
      },
      count: (server) => search.count(server),
    },
  });
  const pins: PinAdmission | undefined = options.pinStore
    ? createPinAdmission({
        store: options.pinStore,
        index: (server, tools) => search.list(server, tools),
        log,
        emit,
        ...(options.pinReviewCommand !== undefined && { reviewCommand: options.pinReviewCommand }),
      })
    : undefined;
  /**
   * A held tool (SPEC §3.13) is not indexed, so the discovery gate would refuse it as undiscovered;
   * this filter, just before it, refuses it naming the operator's pending review instead, unless
   * access control hides the tool's server (then it is refused as any unknown name, so a hidden
   * server's held tools are not revealed). A transparent face's calls are checked against its own
   * listing.
   */
  function heldTools(filters: FilterOptions): CallFilter {
    const visible = accessPredicate(filters.accessControl ?? {});
    return function toolPins(request, context) {
      if (context.listing !== undefined) {
        const reason = context.listing.held?.(request.tool);
        return reason === undefined ? { decision: 'allow' } : { decision: 'deny', reason };
      }
      const held = context.listing === undefined ? pins?.refusal(request.tool) : undefined;
      if (held === undefined || !visible(request.tool, held.server)) return { decision: 'allow' };
      return { decision: 'deny', reason: held.reason };
    };
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
        ...(pins || options.listingHolds === true ? [heldTools(filters)] : []),
        discovered,
        ...(filters.regoPolicy ? [filters.regoPolicy] : []),
        ...(filters.elicitation ? [filters.elicitation] : []),
        ...(options.extraCallFilters ?? []),
        ...(filters.approvalRequired ? [approvalRequired(filters.approvalRequired)] : []),
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
  const search: Search = createSearch({
    localTools: registry.localTools(),
    servers: registry,
    store,
    reporter,
    filters: () => pipelines.search,
    log,
    ...(options.embeddings !== undefined && { embeddings: options.embeddings }),
  });
  const stamping = createStamping({
    tools: search,
    servers: registry,
    ...(governance && { governance }),
    logger,
    emit,
  });
  const dispatch: Dispatch = createDispatch({
    registry,
    logger,
    ...(options.callTimeoutMs !== undefined && { callTimeoutMs: options.callTimeoutMs }),
    ...(options.connectTimeoutMs !== undefined && { connectTimeoutMs: options.connectTimeoutMs }),
    ...(options.credentials && { credentials: options.credentials }),
  });
  const loads = createLoad({
    registry,
    emit,
    reporter,
    filters: () => pipelines.load,
    log,
    connectTimeoutMs: options.connectTimeoutMs ?? defaultConnectTimeoutMs,
    ...(options.allowLocalhostLoads !== undefined && { allowLocalhostLoads: options.allowLocalhostLoads }),
    ...(options.loadResolver && { loadResolver: options.loadResolver }),
  });

  return {
    get searchMode() {
      return search.mode;
    },

    ready: () => search.ready(),

    search: (request, context) => search.search(request, context),

    async call(input, context) {
      const request = await stamping.stampOrRefuse(input, context);
      if ('content' in request) return request;
      const decided = await runCallPipeline(pipelines.call, request, { context, reporter });
      if (!decided.allowed) return decided.result ?? textResult(decided.reason, true);
      // A filter that renamed the tool gets the stamp of the tool it named, never the old one's server.
      const renamed =
        decided.value.tool === request.tool ? undefined : await stamping.stampOrRefuse(decided.value, context);
      if (renamed !== undefined && 'content' in renamed) return renamed;
      const final = renamed === undefined ? decided.value : { ...renamed, arguments: decided.value.arguments };
      const start = process.hrtime.bigint();
      const outcome = await decided.wrap(() => dispatch.dispatch(final, context));
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

    load: (request, context) => loads.load(request, context),

    admit: (name, spec) => registry.admit(name, spec),

    start: () => registry.start(),

    async close() {
      await registry.close();
      await loads.close();
      await search.close();
    },

    readmitPins: async () => {
      await pins?.readmit();
    },

    async reconfigure(next) {
      // Filters first: a bad pattern throws here and nothing has changed yet.
      pipelines = assemble(next);
      const report = await registry.reconfigure(next.servers);
      // Every connected server's last listing is checked again against the store as it is now:
      // a definition the operator accepted since becomes searchable and callable, without a reconnect.
      await pins?.readmit();
      return report;
    },
  };
}
