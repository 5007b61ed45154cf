import type { CredentialLookup } from '../credentials/credentialed-fetch';
import { Downstream } from '../downstream/downstream';
import { ProxyError } from '../errors';
import type { ProxyLogger } from './create-gateway';
import { isInputRequired } from './input-required';
import { askerOf, type Reach, type Registry } from './registry';
import type { CallContext, CallRequest, DispatchOutcome, DownstreamSpec } from './types';

/**
 * `_meta` key by which a tool result says its outcome is unknown (`"unknown"`): the gateway then
 * reports the dispatch as `unknown`, so single-use evidence stays held (SPEC §4.7).
 */
export const outcomeMetaKey = 'io.extensible-mcp/outcome';

/**
 * How long a downstream may take to connect and list its tools, and each new HTTP connection to
 * open, its DNS lookup included: 30 s, since a name just re-registered (a restarted container) can
 * take 5–15 s to resolve, longer than undici's own 10 s default.
 */
export const defaultConnectTimeoutMs = 30_000;

/** Options of {@link createDispatch}. */
export interface DispatchOptions {
  /** The registry: the local tools, the connections, and the operator's URL for each name. */
  readonly registry: Pick<Registry, 'localTool' | 'get' | 'track' | 'operatorUrl'>;
  readonly logger: ProxyLogger;
  /** Per-call downstream timeout; default 60 s. */
  readonly callTimeoutMs?: number;
  /** Timeout for connecting to a downstream and listing its tools; default 30 s. */
  readonly connectTimeoutMs?: number;
  /** Credentials for Streamable HTTP downstreams, asked per request with the server name and the exact URL. */
  readonly credentials?: CredentialLookup;
}

/** Runs stamped calls, and says how each downstream is reached. */
export interface Dispatch {
  /** The timeouts and credentials of the connection to `name`. */
  reach(name: string, spec: DownstreamSpec): Reach;
  /** Runs the final request: the local tool, or the downstream (never replayed after a lost connection). */
  dispatch(request: CallRequest, context: CallContext): Promise<DispatchOutcome>;
}

/**
 * The gateway's dispatch (SPEC §3.9, §3.12): the call that passed the call pipeline runs on its
 * local tool, the face's listing connection or the registry's downstream, under the call timeout,
 * and its outcome is classified `completed`, `failed` or `unknown` (the call may have run).
 */
export function createDispatch(options: DispatchOptions): Dispatch {
  const { registry, logger } = options;
  const callTimeoutMs = options.callTimeoutMs ?? 60_000;
  const connectTimeoutMs = options.connectTimeoutMs ?? defaultConnectTimeoutMs;
  const lookup = options.credentials;

  return {
    reach(name, spec) {
      return {
        callTimeoutMs,
        connectTimeoutMs,
        // Bound to this server's name: the lookup decides per URL whether a token is presented.
        ...(lookup &&
          spec.kind === 'http' && {
            credentials: (url: string) => lookup({ serverName: name, url, configuredUrl: registry.operatorUrl(name) }),
          }),
      };
    },

    async dispatch(request, context) {
      try {
        if (request.server === undefined) {
          const local = request.toolName === undefined ? undefined : registry.localTool(request.toolName);
          if (!local)
            return { status: 'failed', reason: `Unknown tool "${request.tool}". Use search_tools to find tools.` };
          return { status: 'completed', result: await local.handler({ ...request.arguments }, context) };
        }
        const target = context.listing ?? registry.get(request.server.name);
        const toolName = request.toolName;
        if (!target || toolName === undefined) {
          return { status: 'failed', reason: `Unknown tool "${request.tool}". Use search_tools to find tools.` };
        }
        const result =
          target instanceof Downstream
            ? await registry.track(target, context, () =>
                target.call(toolName, { ...request.arguments }, askerOf(context)),
              )
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
        // A local tool asking the person (a URL ask) ran nothing it cannot run again: the face asks, the retry re-enters.
        if (isInputRequired(error)) throw error;
        if (ProxyError.isInstance(error)) {
          const unknown = error.code === 'downstream-timeout' || error.code === 'outcome-unknown';
          return { status: unknown ? 'unknown' : 'failed', reason: error.message };
        }
        logger.error(`tool ${request.tool} failed`, error);
        return { status: 'failed', reason: `Tool "${request.tool}" failed unexpectedly.` };
      }
    },
  };
}
