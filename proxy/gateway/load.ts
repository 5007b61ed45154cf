import { ProxyError } from '../errors';
import { type LoadResolver, safeLoad, safeLoadDispatcher } from '../filters/safe-load';
import { nameProblem } from '../names';
import { scopeDigest } from './discovery-scope';
import type { LoadDispatcher, Registry } from './registry';
import { type PipelineReporter, runLoadPipeline } from './run-pipelines';
import type { CallContext, EventHook, LoadFilter, LoadRequest, LoadResult } from './types';

/** Options of {@link createLoad}. */
export interface LoadOptions {
  /** The registry: whose each name is, and admission. */
  readonly registry: Pick<Registry, 'isOperators' | 'operatorUrl' | 'taken' | 'connect'>;
  readonly emit: EventHook;
  readonly reporter: PipelineReporter;
  /** The operator's load pipeline as configured now (a reload replaces it). */
  readonly filters: () => readonly LoadFilter[];
  readonly log: (line: string) => void;
  /** Lets `load_mcp_server` reach `http://localhost` and loopback addresses (SPEC §3.4). Default false. */
  readonly allowLocalhostLoads?: boolean;
  /** Resolves host names for runtime loads only (default: the system resolver). */
  readonly loadResolver?: LoadResolver;
  /** How long a loaded server's new connection may take to open, its lookup included. */
  readonly connectTimeoutMs: number;
}

/** `load_mcp_server` as the gateway runs it. */
export interface Load {
  /** The operator's names rule → the load pipeline → the safe default → admission. */
  load(request: LoadRequest, context: CallContext): Promise<LoadResult>;
  /** Closes the connection pools of the runtime-loaded servers. */
  close(): Promise<void>;
}

/**
 * The gateway's runtime loads (SPEC §3.4): a configured name stays the operator's, the operator's
 * load filters run first, then the safe default (public `https:` only, unless localhost loads are
 * allowed), and a loaded server connects through its own pool, which checks every address it dials.
 */
export function createLoad(options: LoadOptions): Load {
  const { registry, emit, reporter, filters, log } = options;
  /** The safe default for runtime loads: whatever `load_control` says, this floor holds. */
  const safeLoadOptions = {
    allowLocalhost: options.allowLocalhostLoads === true,
    ...(options.loadResolver && { resolve: options.loadResolver }),
  };
  const safeLoadFilters: LoadFilter[] = [safeLoad(safeLoadOptions)];
  /** The connection pool of each runtime-loaded server, whose own lookup checks every address. */
  const loadDispatchers = new Map<string, LoadDispatcher>();

  return {
    async load(request, context) {
      const name = request.serverName;
      const problem = nameProblem(name);
      if (problem) return { loaded: false, reason: `Invalid server name: ${problem}.` };
      // A configured name is the operator's, connected or not (SPEC §3.4). The one load it allows
      // is a retry of the operator's own server at exactly the operator's URL (after a failed
      // start or a rotated token): nothing is re-pointed, and it stays the operator's admission.
      const operatorUrl = registry.operatorUrl(name);
      const retry = registry.isOperators(name) && operatorUrl !== undefined && request.url === operatorUrl;
      if (registry.isOperators(name) && !retry) {
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
      if (registry.taken(name)) {
        return { loaded: false, reason: `A server named "${name}" is already connected; choose another name.` };
      }
      const decided = await runLoadPipeline(filters(), request, { context, reporter });
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
            connectTimeoutMs: options.connectTimeoutMs,
            onRefused: (reason) => {
              refused = reason;
              log(`server "${name}": connection refused: ${reason}`);
            },
          });
      try {
        const report = await registry.connect({
          name,
          spec: { kind: 'http', url: request.url },
          admission: retry ? 'config' : 'runtime',
          ...(dispatcher && { dispatcher }),
        });
        if (dispatcher) loadDispatchers.set(name, dispatcher);
        return { loaded: true, server: report.server, tools: report.tools };
      } catch (error) {
        await dispatcher?.close().catch(() => undefined);
        if (refused !== undefined) return { loaded: false, reason: `Refused to load "${name}": ${refused}` };
        const reason = ProxyError.isInstance(error) ? error.message : `Could not load "${name}".`;
        return { loaded: false, reason };
      }
    },

    async close() {
      await Promise.allSettled([...loadDispatchers.values()].map((dispatcher) => dispatcher.close()));
    },
  };
}
