import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  type Notification,
  ReadResourceRequestSchema,
  type Result,
  ResultSchema,
  type ServerCapabilities,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  type Tool,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { elicitationFilter } from '../elicitation/elicitation-filter';
import { ProxyError } from '../errors';
import {
  createGateway,
  type GatewayOptions,
  gatewayInternals,
  type SessionConnection,
} from '../gateway/create-gateway';
import type { CallContext, Gateway, ServerFacts } from '../gateway/types';
import { createUpstreamTransport, describeUpstream, type UpstreamTransportOptions } from './create-upstream-transport';
import { toWireError } from './to-wire-error';
import type { TransparentConfig } from './transparent-config';

/** Options for {@link createTransparentProxy}. */
export interface TransparentProxyOptions {
  readonly config: TransparentConfig;
  /** Reach the upstream through this transport instead of `config.upstream` (tests link an in-memory server). */
  readonly upstreamTransport?: Transport;
  /** How a stdio upstream's stderr is handled. */
  readonly upstreamStderr?: UpstreamTransportOptions['stderr'];
  /** Diagnostics sink; the CLI writes to stderr (stdout is the MCP channel). */
  readonly log?: (line: string) => void;
  /**
   * The call pipeline's other filters and the event hook (SPEC §3.6): transparent `tools/call`
   * runs access control → discovery gate → `rego_policy` → elicitation → extra filters → router,
   * exactly as search mode does. Filters see the bare upstream name and `server.name = proxy.name`.
   */
  readonly gateway?: Pick<
    GatewayOptions,
    'accessControl' | 'regoPolicy' | 'extraCallFilters' | 'extraResponseFilters' | 'governance' | 'onEvent'
  >;
}

/** A transparent proxy for one downstream client: the upstream's own tools, plus call-time elicitation. */
export interface TransparentProxy {
  /** Connects the upstream (failing with `ProxyError('downstream-unavailable')`), then serves the downstream on `transport`. */
  connect(transport: Transport): Promise<void>;
  /** Closes both sides; safe to call at any time, any number of times. */
  close(): Promise<void>;
  /** Settles once the proxy has stopped: `upstream-lost` when the upstream went away on its own. */
  readonly closed: Promise<'closed' | 'upstream-lost'>;
}

/** The client capabilities the proxy declares to its upstream: none, since it forwards no server-to-client requests. */
export const UPSTREAM_CLIENT_CAPABILITIES = {} as const;

/** The transparent gateway: the upstream's own names, discovered by listing, with elicitation as a call filter. */
function transparentGateway(options: TransparentProxyOptions, log: (line: string) => void): Gateway {
  const { config } = options;
  const filters = options.gateway ?? {};
  return createGateway(
    {
      ...filters,
      embeddings: false,
      logger: {
        info: log,
        error: (line, error) => log(`${line}${error instanceof Error ? `: ${error.message}` : ''}`),
      },
      extraCallFilters: [elicitationFilter(config), ...(filters.extraCallFilters ?? [])],
    },
    'listing',
  );
}

// Upstream notifications passed on to the client. Progress is relayed per call, cancellation by signal.
const FORWARDED_NOTIFICATIONS = new Set([
  'notifications/tools/list_changed',
  'notifications/resources/list_changed',
  'notifications/resources/updated',
  'notifications/prompts/list_changed',
  'notifications/message',
]);

/** The capabilities the proxy can honour: the upstream's, limited to what it forwards. */
function mirroredCapabilities(upstream: ServerCapabilities): ServerCapabilities {
  return {
    tools: { ...upstream.tools },
    ...(upstream.resources !== undefined && { resources: upstream.resources }),
    ...(upstream.prompts !== undefined && { prompts: upstream.prompts }),
    ...(upstream.completions !== undefined && { completions: upstream.completions }),
    ...(upstream.logging !== undefined && { logging: upstream.logging }),
  };
}

/**
 * Creates the transparent-mode proxy of SPEC §3.10: `tools/list` is the upstream's raw answer
 * (unknown fields kept, nothing renamed or added) and is what the session has discovered;
 * `tools/call` goes through the gateway's call pipeline (access control, discovery gate,
 * `rego_policy`, elicitation, extra filters, router; events for each) and reaches this session's
 * own upstream connection once, never replayed; resources, prompts, completions and logging are
 * forwarded when the upstream offers them; list-changed, resource-update and log notifications
 * are passed on.
 */
export function createTransparentProxy(options: TransparentProxyOptions): TransparentProxy {
  const { config } = options;
  const log = options.log ?? (() => undefined);
  const gateway = transparentGateway(options, log);
  const internals = gatewayInternals(gateway);
  const session = randomUUID();
  const facts: ServerFacts = {
    name: config.proxy.name,
    admission: 'config',
    ...(config.upstream.kind === 'http' && { url: config.upstream.url }),
  };
  const upstream = new Client(
    { name: config.proxy.name, version: config.proxy.version },
    { capabilities: UPSTREAM_CLIENT_CAPABILITIES },
  );
  let server: Server | undefined;
  // Notifications wait until the client has finished initializing (the upstream may talk earlier).
  let clientReady = false;
  let closing: Promise<void> | undefined;
  let settleClosed: (outcome: 'closed' | 'upstream-lost') => void = () => undefined;
  const closed = new Promise<'closed' | 'upstream-lost'>((resolve) => {
    settleClosed = resolve;
  });
  /** What each in-flight `tools/call` needs for the upstream request: its client's signal, progress relay and `_meta`. */
  const inFlight = new WeakMap<CallContext, { options: RequestOptions; meta: Record<string, unknown> }>();

  async function forward(method: string, params: unknown, requestOptions: RequestOptions): Promise<Result> {
    try {
      return await upstream.request(
        { method, ...(params !== undefined && { params }) } as never,
        ResultSchema,
        requestOptions,
      );
    } catch (error) {
      throw toWireError(error, log);
    }
  }

  // The session's own upstream connection, reached only through the gateway's dispatch.
  const connection: SessionConnection = {
    facts,
    async call(tool, args, context) {
      const request = inFlight.get(context);
      const params = {
        name: tool,
        arguments: args,
        ...(request && Object.keys(request.meta).length > 0 && { _meta: request.meta }),
      };
      try {
        return (await upstream.request({ method: 'tools/call', params }, ResultSchema, request?.options)) as never;
      } catch (error) {
        // An upstream protocol error is the upstream's answer: shown as an error result naming it.
        if (error instanceof McpError) {
          throw new ProxyError('downstream-failed', `The upstream failed on "${tool}": ${error.message}`, {
            cause: error,
          });
        }
        throw error;
      }
    },
  };
  internals.attach(session, connection);

  function registerHandlers(target: Server, capabilities: ServerCapabilities): void {
    target.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
      // The raw result, validated only as "an object": the SDK's typed schema would drop unknown tool fields.
      const result = await forward('tools/list', request.params, { signal: extra.signal });
      // What this session was shown is what it has discovered (SPEC §3.5); later pages add to it.
      const tools = Array.isArray(result.tools)
        ? (result.tools as Tool[]).filter((tool) => typeof tool?.name === 'string')
        : [];
      await internals.listed(session, facts, tools, request.params?.cursor !== undefined);
      return result;
    });

    target.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const { name, arguments: args, _meta } = request.params;
      const formCapable = target.getClientCapabilities()?.elicitation?.form !== undefined;
      const context: CallContext = {
        session,
        signal: extra.signal,
        ...(formCapable && {
          elicit: (params) =>
            target.elicitInput(params, {
              // Tie the form to this tool call, so the client shows it in context (and HTTP routes it there).
              relatedRequestId: extra.requestId,
              timeout: config.elicitation.timeoutMs,
              signal: extra.signal,
            }),
        }),
      };
      // Relay progress under the client's own token; the SDK puts its own token on the upstream request.
      const { progressToken, ...meta } = _meta ?? {};
      inFlight.set(context, {
        meta,
        options: {
          signal: extra.signal,
          resetTimeoutOnProgress: true,
          ...(progressToken !== undefined && {
            onprogress: (progress) => {
              void extra
                .sendNotification({ method: 'notifications/progress', params: { ...progress, progressToken } })
                .catch((error: unknown) => log(`progress relay failed: ${String(error)}`));
            },
          }),
        },
      });
      return (await gateway.call({ tool: name, arguments: args ?? {} }, context)) as never;
    });

    const passthrough = (schema: Parameters<Server['setRequestHandler']>[0], method: string) => {
      target.setRequestHandler(schema, (request: { params?: unknown }, extra: { signal: AbortSignal }) =>
        forward(method, request.params, { signal: extra.signal }),
      );
    };
    if (capabilities.resources !== undefined) {
      passthrough(ListResourcesRequestSchema, 'resources/list');
      passthrough(ListResourceTemplatesRequestSchema, 'resources/templates/list');
      passthrough(ReadResourceRequestSchema, 'resources/read');
      if (capabilities.resources.subscribe === true) {
        passthrough(SubscribeRequestSchema, 'resources/subscribe');
        passthrough(UnsubscribeRequestSchema, 'resources/unsubscribe');
      }
    }
    if (capabilities.prompts !== undefined) {
      passthrough(ListPromptsRequestSchema, 'prompts/list');
      passthrough(GetPromptRequestSchema, 'prompts/get');
    }
    if (capabilities.completions !== undefined) passthrough(CompleteRequestSchema, 'completion/complete');
    if (capabilities.logging !== undefined) passthrough(SetLevelRequestSchema, 'logging/setLevel');
  }

  let stopping = false;
  function close(): Promise<void> {
    // Flag first: a transport may report its close synchronously, before `closing` is assigned.
    stopping = true;
    internals.detach(session);
    closing ??= Promise.allSettled([server?.close(), upstream.close(), gateway.close()]).then(() =>
      settleClosed('closed'),
    );
    return closing;
  }

  upstream.onclose = () => {
    if (!stopping) {
      log('the upstream MCP server closed the connection');
      settleClosed('upstream-lost');
    }
    void close();
  };
  upstream.fallbackNotificationHandler = async (notification: Notification) => {
    if (!FORWARDED_NOTIFICATIONS.has(notification.method)) return;
    if (!clientReady) return;
    await server?.notification(notification as never).catch((error: unknown) => {
      log(`could not forward ${notification.method}: ${String(error)}`);
    });
  };

  return {
    closed,
    close,
    async connect(transport) {
      if (server !== undefined) throw new Error('This transparent proxy is already connected; create one per client.');
      try {
        await upstream.connect(
          options.upstreamTransport ??
            createUpstreamTransport(config.upstream, {
              ...(options.upstreamStderr !== undefined && { stderr: options.upstreamStderr }),
            }),
        );
      } catch (error) {
        const detail = error instanceof Error ? error.message : String(error);
        throw new ProxyError(
          'downstream-unavailable',
          `Cannot connect to the upstream MCP server (${describeUpstream(config.upstream)}): ${detail}`,
          { cause: error },
        );
      }
      // Closed while the upstream was starting: do not start serving.
      if (stopping) {
        await upstream.close();
        return;
      }
      const capabilities = mirroredCapabilities(upstream.getServerCapabilities() ?? {});
      const instructions = upstream.getInstructions();
      const created = new Server(
        { name: config.proxy.name, version: config.proxy.version },
        { capabilities, ...(instructions !== undefined && { instructions }) },
      );
      registerHandlers(created, capabilities);
      created.onclose = () => void close();
      created.oninitialized = () => {
        clientReady = true;
      };
      server = created;
      await created.connect(transport);
    },
  };
}
