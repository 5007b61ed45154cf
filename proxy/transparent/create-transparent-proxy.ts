import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/client';
import { ResultSchema } from '@modelcontextprotocol/core';
import type {
  ClientCapabilities,
  ListToolsResult,
  Notification,
  RequestId,
  RequestOptions,
  Result,
  ServerCapabilities,
  ServerContext,
  Tool,
  Transport,
} from '@modelcontextprotocol/server';
import { ProtocolError, ProtocolErrorCode, SdkError, SdkErrorCode, Server } from '@modelcontextprotocol/server';
import { modeSupported, relayServerRequests, type ServerRequestRelay } from '../downstream/relay-server-requests';
import { elicitationFilter, passkeyConfirmationRules } from '../elicitation/elicitation-filter';
import { ProxyError } from '../errors';
import { type AccessControlOptions, accessPredicate } from '../filters/access-control';
import type { ApprovalRequiredOptions } from '../filters/approval-required';
import { matchNameGlob } from '../filters/match-name-glob';
import { createGateway, type GatewayOptions } from '../gateway/create-gateway';
import { scopeDigest } from '../gateway/discovery-scope';
import type {
  CallContext,
  DiscoveryScope,
  Gateway,
  ListingConnection,
  Principal,
  ProxyEvent,
  ServerFacts,
} from '../gateway/types';
import { pushUrlAsk } from '../meta-tools/input-rounds';
import { qualifyName } from '../names';
import type { PinStore } from '../pins/types';
import {
  connectUpstream,
  createUpstreamTransport,
  describeUpstream,
  type UpstreamTransportOptions,
  upstreamNegotiation,
} from './create-upstream-transport';
import { InitializeGate, type InitializeMessage } from './initialize-gate';
import { createPinnedCatalog, type PinnedCatalog } from './pinned-catalog';
import { toWireError } from './to-wire-error';
import type { TransparentConfig, UpstreamConfig } from './transparent-config';

/** The non-tool requests relayed through the listing filters. */
type PassthroughMethod =
  | 'resources/list'
  | 'resources/templates/list'
  | 'resources/read'
  | 'resources/subscribe'
  | 'resources/unsubscribe'
  | 'prompts/list'
  | 'prompts/get'
  | 'completion/complete'
  | 'logging/setLevel';

/** Options for {@link createTransparentProxy}. */
export interface TransparentProxyOptions {
  readonly config: TransparentConfig;
  /** Who the client is, as the face proved it (SPEC §3.5): the local user on stdio, the token's name over HTTP. */
  readonly principal: Principal;
  /**
   * Reach the upstream through this transport instead of `config.upstream` (tests link an
   * in-memory server). Used for this proxy's one session; a reload never re-points it.
   */
  readonly upstreamTransport?: Transport;
  /** How a stdio upstream's stderr is handled. */
  readonly upstreamStderr?: UpstreamTransportOptions['stderr'];
  /** Diagnostics sink; the CLI writes to stderr (stdout is the MCP channel). */
  readonly log?: (line: string) => void;
  /**
   * Where tool definitions are pinned (SPEC §3.13, docs/pinning.md): every listing of the upstream
   * is admitted against it under `proxy.name`, and a changed or new definition is neither listed
   * nor callable until the operator accepts it. The owner closes it.
   */
  readonly pinStore?: PinStore;
  /**
   * The call pipeline's other filters and the event hook (SPEC §3.6): transparent `tools/call`
   * runs access control → discovery gate → `rego_policy` → elicitation → extra filters →
   * `approval_required` → router, exactly as search mode does. Filters see the bare upstream name
   * and `server.name = proxy.name`.
   *
   * `approvalRequired` is the household's gate (docs/human-authority.md): given with a `gate` and
   * a `store`, the file's `confirm_if: {always: true, passkey: [roles]}` becomes an
   * `approval_required` rule for `<proxy.name>__<tool>` and those roles (merged with the host's
   * own `rules`, globs over the same qualified names), so the call waits for those passkeys over
   * exactly it. Without a gate such a call is refused with `confirmation_unavailable` (fail closed).
   */
  readonly gateway?: Pick<
    GatewayOptions,
    | 'accessControl'
    | 'regoPolicy'
    | 'extraCallFilters'
    | 'extraResponseFilters'
    | 'approvalRequired'
    | 'governance'
    | 'onEvent'
  >;
}

/**
 * How a transparent proxy stopped: `closed` by its owner or its client, `upstream-lost` when the
 * upstream went away on its own, `upstream-unavailable` when it could not be reached at all.
 */
export type TransparentOutcome = 'closed' | 'upstream-lost' | 'upstream-unavailable';

/** A transparent proxy for one client session: the upstream's own tools, plus call-time elicitation. */
export interface TransparentProxy {
  /**
   * Serves the client on `transport`. The upstream connection opens when the client's
   * `initialize` arrives, declaring the client's own capabilities (SPEC §3.10); if it cannot be
   * reached, that `initialize` is answered with an error naming the upstream and the proxy stops
   * with `upstream-unavailable`.
   */
  connect(transport: Transport): Promise<void>;
  /**
   * Applies a new configuration (SIGHUP): new elicitation policy and filters for the next call, and
   * a changed upstream re-pointed (a new connection with the same client capabilities; the old
   * one closes once its calls in flight end). What may be called is then what the new upstream
   * lists, and the client is told the list changed. A failure
   * (the new upstream unreachable) changes nothing and throws.
   */
  reload(config: TransparentConfig): Promise<void>;
  /**
   * Admits the upstream's last listing again against the pin store as it is now (SIGHUP, after
   * `pins accept`); the client is told the list changed when what it may see did.
   */
  readmitPins(): Promise<void>;
  /** Closes both sides; safe to call at any time, any number of times. */
  close(): Promise<void>;
  /** Settles once the proxy has stopped. */
  readonly closed: Promise<TransparentOutcome>;
}

/**
 * The client capabilities the proxy declares to its upstream: exactly the elicitation, sampling
 * and roots capabilities its client declared, since it relays exactly those requests (task
 * augmentation and experimental capabilities are not relayed, so never declared).
 */
export function mirrorClientCapabilities(client: ClientCapabilities): ClientCapabilities {
  return {
    ...(client.elicitation !== undefined && { elicitation: client.elicitation }),
    ...(client.sampling !== undefined && { sampling: client.sampling }),
    ...(client.roots !== undefined && { roots: client.roots }),
  };
}

/** The tool side of `filters.access_control`: the file's rules and the host's, both applied. */
function toolAccess(config: TransparentConfig, options: TransparentProxyOptions): AccessControlOptions {
  const host = options.gateway?.accessControl ?? {};
  return {
    deny: [...config.accessControl.deny, ...(host.deny ?? [])],
    denyPatterns: [...config.accessControl.denyPatterns, ...(host.denyPatterns ?? [])],
    ...(host.allowServers !== undefined && { allowServers: host.allowServers }),
  };
}

/**
 * The transparent gateway: the upstream's own names, callable when the listing filters show them
 * now (SPEC §3.5), with elicitation as a call filter.
 */
export function transparentGateway(
  config: TransparentConfig,
  options: TransparentProxyOptions,
  log: (line: string) => void,
): Gateway {
  const filters = options.gateway ?? {};
  const approvals = transparentApprovals(config, filters.approvalRequired);
  return createGateway({
    ...filters,
    accessControl: toolAccess(config, options),
    embeddings: false,
    listingHolds: options.pinStore !== undefined,
    logger: {
      info: log,
      error: (line, error) => log(`${line}${error instanceof Error ? `: ${error.message}` : ''}`),
    },
    extraCallFilters: [
      // Built from the file's policy alone: a config object can never switch off the passkey
      // refusal; only a host's gate does, and that gate then enforces it.
      elicitationFilter({
        elicitation: config.elicitation,
        policies: config.policies,
        tools: config.tools,
        ...(approvals?.gated === true && { passkeyConfirmations: 'approval-required' as const }),
      }),
      ...(filters.extraCallFilters ?? []),
    ],
    ...(approvals !== undefined && { approvalRequired: approvals.options }),
  });
}

/**
 * The `approval_required` options of a transparent proxy: the host's, with the file's passkey
 * confirmations added as rules over qualified names (the filter qualifies a call as
 * `<proxy.name>__<tool>`, the file keys its tools by the upstream's bare names). `gated` only when
 * the host gave a gate and a store, the only case in which the elicitation filter leaves those calls
 * to it. No host options: none.
 */
function transparentApprovals(
  config: TransparentConfig,
  host: ApprovalRequiredOptions | undefined,
): { readonly gated: boolean; readonly options: ApprovalRequiredOptions } | undefined {
  if (host === undefined) return undefined;
  const confirmations = passkeyConfirmationRules(config.tools).map((rule) => ({
    ...rule,
    tool: qualifyName(config.proxy.name, rule.tool),
  }));
  return {
    gated: host.gate !== undefined && host.store !== undefined,
    options: { ...host, rules: [...confirmations, ...host.rules] },
  };
}

// Upstream notifications passed on to the client. Progress is relayed per call, cancellation by signal.
const FORWARDED_NOTIFICATIONS = new Set([
  'notifications/tools/list_changed',
  'notifications/resources/list_changed',
  'notifications/resources/updated',
  'notifications/prompts/list_changed',
  'notifications/message',
]);

// Client notifications passed on to the upstream (cancellation and progress travel with their requests).
const CLIENT_NOTIFICATIONS = new Set(['notifications/roots/list_changed']);

/** The capabilities the proxy can honour: the upstream's, limited to what it forwards. */
export function mirroredCapabilities(upstream: ServerCapabilities): ServerCapabilities {
  return {
    tools: { ...upstream.tools },
    ...(upstream.resources !== undefined && { resources: upstream.resources }),
    ...(upstream.prompts !== undefined && { prompts: upstream.prompts }),
    ...(upstream.completions !== undefined && { completions: upstream.completions }),
    ...(upstream.logging !== undefined && { logging: upstream.logging }),
  };
}

function sameUpstream(left: UpstreamConfig, right: UpstreamConfig): boolean {
  return JSON.stringify(left) === JSON.stringify(right);
}

/**
 * What the listing filters show (SPEC §3.5): the tools, resources and prompts not hidden, the rest
 * refused. Compiled once per configuration, never per request.
 */
export function listingAccess(config: TransparentConfig, options: TransparentProxyOptions) {
  const tool = accessPredicate(toolAccess(config, options));
  const hiddenResource = matchNameGlob(config.accessControl.denyResources);
  const hiddenPrompt = matchNameGlob(config.accessControl.denyPrompts);
  return {
    tool: (name: string) => tool(name, config.proxy.name),
    resource: (uri: string) => !hiddenResource(uri),
    prompt: (name: string) => !hiddenPrompt(name),
  };
}

/** Every page of the upstream's raw `tools/list`. */
export async function listAllTools(client: Client): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: unknown;
  do {
    const page = await client.request(
      { method: 'tools/list', ...(typeof cursor === 'string' && { params: { cursor } }) },
      ResultSchema,
    );
    if (Array.isArray(page.tools)) {
      tools.push(...(page.tools as Tool[]).filter((tool) => typeof tool?.name === 'string'));
    }
    cursor = page.nextCursor;
  } while (typeof cursor === 'string');
  return tools;
}

/** The listing filters of one configuration (see `listingAccess`). */
type ListingAccess = ReturnType<typeof listingAccess>;

/** What a face hands {@link registerListingHandlers}: the filters in force, its event hook, its upstream. */
export interface ListingSide {
  readonly access: () => ListingAccess;
  readonly emit: (event: Pick<ProxyEvent, 'filter' | 'tool' | 'decision' | 'reason'>) => void;
  /** Sends a request to the upstream that serves this client (raw result, unknown fields kept). */
  readonly forward: (method: string, params: unknown, ctx: ServerContext) => Promise<Result>;
  /** With pins: the catalog of the upstream connection serving this request, whose admission `tools/list` shows. */
  readonly catalog?: (ctx: ServerContext) => Promise<PinnedCatalog>;
}

/**
 * Registers what transparent mode relays besides `tools/call`, on either protocol version:
 * `tools/list` as the upstream answers it minus hidden tools, and resources, prompts, completions
 * and logging through the listing filters (SPEC §3.5, §10.1), each decision an event.
 */
export function registerListingHandlers(target: Server, capabilities: ServerCapabilities, side: ListingSide): void {
  target.setRequestHandler('tools/list', async (request, ctx) => {
    // The raw result, validated only as "an object": the SDK's typed schema would drop unknown tool fields.
    const result = await side.forward('tools/list', request.params, ctx);
    if (!Array.isArray(result.tools)) return result as ListToolsResult;
    // Held tools are not listed (SPEC §3.13): only a definition the pins admitted, checked against
    // the whole listing (a page alone cannot tell a held tool from an admitted one).
    const catalog = await side.catalog?.(ctx);
    await catalog?.tools(false);
    // Hidden tools are not listed (SPEC §3.5); everything else is the upstream's, byte for byte.
    return {
      ...result,
      tools: (result.tools as Tool[]).filter(
        (tool) => typeof tool?.name !== 'string' || (side.access().tool(tool.name) && (catalog?.admits(tool) ?? true)),
      ),
    };
  });
  /**
   * Forwards a non-tool request through the listing filters (SPEC §3.5, §10.1): `subject` names
   * what it touches (a resource URI or a prompt name, else the method), a hidden one is refused
   * as not found, and each decision is an event. `shown` narrows a listing's items.
   */
  const passthrough = (
    method: PassthroughMethod,
    gate: {
      readonly subject?: (params: Record<string, unknown>) => string | undefined;
      readonly shown?: (result: Result) => Result;
    } = {},
  ) => {
    target.setRequestHandler(method, async (request: { params?: unknown }, ctx: ServerContext) => {
      const params = (request.params ?? {}) as Record<string, unknown>;
      const subject = gate.subject?.(params);
      const allowed =
        subject === undefined ||
        (method.startsWith('resources/') ? side.access().resource(subject) : side.access().prompt(subject));
      const tool = subject === undefined ? method : `${method} ${subject}`.slice(0, 2000);
      if (!allowed) {
        side.emit({
          filter: 'accessControl',
          tool,
          decision: 'deny',
          reason: 'hidden by filters.access_control',
        } as const);
        // Answered as the upstream answers what it does not have: the hidden item stays unseen.
        throw new ProtocolError(
          method.startsWith('resources/') ? -32002 : ProtocolErrorCode.InvalidParams,
          method.startsWith('resources/') ? `Resource not found: ${subject}` : `Unknown prompt: ${subject}`,
        );
      }
      side.emit({ filter: 'accessControl', tool, decision: 'allow' } as const);
      const result = await side.forward(method, request.params, ctx);
      return gate.shown ? gate.shown(result) : result;
    });
  };
  const named = (key: string) => (params: Record<string, unknown>) =>
    typeof params[key] === 'string' ? (params[key] as string) : undefined;
  /** A listing without what `visible` hides, unknown fields kept. */
  const narrowed = (key: string, field: string, visible: (subject: string) => boolean) => (result: Result) => {
    const items = result[key];
    if (!Array.isArray(items)) return result;
    return {
      ...result,
      [key]: items.filter((item: Record<string, unknown>) => typeof item?.[field] !== 'string' || visible(item[field])),
    };
  };
  if (capabilities.resources !== undefined) {
    passthrough('resources/list', {
      shown: (result) => narrowed('resources', 'uri', (uri) => side.access().resource(uri))(result),
    });
    passthrough('resources/templates/list', {
      shown: (result) => narrowed('resourceTemplates', 'uriTemplate', (uri) => side.access().resource(uri))(result),
    });
    passthrough('resources/read', { subject: named('uri') });
    if (capabilities.resources.subscribe === true) {
      passthrough('resources/subscribe', { subject: named('uri') });
      passthrough('resources/unsubscribe', { subject: named('uri') });
    }
  }
  if (capabilities.prompts !== undefined) {
    passthrough('prompts/list', {
      shown: (result) => narrowed('prompts', 'name', (name) => side.access().prompt(name))(result),
    });
    passthrough('prompts/get', { subject: named('name') });
  }
  if (capabilities.completions !== undefined) {
    passthrough('completion/complete', {
      // A completion names the prompt or resource it completes for: a hidden one completes nothing.
      subject: (params) => {
        const ref = params.ref as { type?: unknown; name?: unknown; uri?: unknown } | undefined;
        if (ref?.type === 'ref/prompt' && typeof ref.name === 'string') return ref.name;
        if (ref?.type === 'ref/resource' && typeof ref.uri === 'string') return ref.uri;
        return undefined;
      },
    });
  }
  if (capabilities.logging !== undefined) passthrough('logging/setLevel');
}

/**
 * Creates the transparent-mode proxy of SPEC §3.10 for one client session. It waits for the
 * client's `initialize`, opens its own upstream connection declaring the client's capabilities,
 * and answers with the upstream's. `tools/list` is the upstream's raw answer (unknown fields kept,
 * nothing renamed or added) and is what the session has discovered; `tools/call` goes through
 * the gateway's call pipeline and reaches the upstream once, never replayed; resources, prompts,
 * completions and logging are forwarded when the upstream offers them. The upstream's own
 * requests (`elicitation/create` after the secret screen, `sampling/createMessage`, `roots/list`,
 * `ping`) are relayed to the client, tied to the tool call in flight; notifications pass both ways.
 */
export function createTransparentProxy(options: TransparentProxyOptions): TransparentProxy {
  const log = options.log ?? (() => undefined);
  let config = options.config;
  let gateway = transparentGateway(config, options, log);
  let access = listingAccess(config, options);
  const session = randomUUID();
  /** This client session's discovery scope, and the context of its events (SPEC §3.5). */
  const scope: DiscoveryScope = { kind: 'session', id: session };
  /** The upstream connection in use, and the config it was opened from. */
  let upstream: { client: Client; target: UpstreamConfig } | undefined;
  /** What the client declared at `initialize`; mirrored to every upstream connection of this session. */
  let clientCapabilities: ClientCapabilities = {};
  let server: Server | undefined;
  // Notifications wait until the client has finished initializing (the upstream may talk earlier).
  let clientReady = false;
  let stopping = false;
  let outcome: TransparentOutcome = 'closed';
  let closing: Promise<void> | undefined;
  let settleClosed: (outcome: TransparentOutcome) => void = () => undefined;
  const closed = new Promise<TransparentOutcome>((resolve) => {
    settleClosed = resolve;
  });
  /** The client's `tools/call` requests in flight: an upstream request is relayed tied to the latest. */
  const callsInFlight: { readonly id: RequestId; readonly tool: string }[] = [];
  /**
   * The upstream's current tools, as it last listed them on the connection in use and the pins
   * admitted them: what the gateway stamps a call from and what `tools/list` may show. Listed by a
   * client's `tools/list` or by the proxy's own when a call names a tool it has not seen (a client
   * need not list first); listed again on `list_changed`.
   */
  let catalog: { readonly client: Client; readonly tools: PinnedCatalog } | undefined;
  /** Calls in flight per upstream connection; a retired one closes when its count reaches zero. */
  const busy = new Map<Client, number>();
  const retired = new Set<Client>();
  /** What each in-flight `tools/call` needs for the upstream request: its client's signal, progress relay and `_meta`. */
  const inFlight = new WeakMap<CallContext, { options: RequestOptions; meta: Record<string, unknown> }>();

  const facts = (): ServerFacts => ({
    name: config.proxy.name,
    admission: 'config',
    ...(config.upstream.kind === 'http' && { url: config.upstream.url }),
  });

  function current(): Client {
    if (upstream === undefined) throw new SdkError(SdkErrorCode.ConnectionClosed, 'The upstream is not connected.');
    return upstream.client;
  }

  async function forward(method: string, params: unknown, requestOptions: RequestOptions): Promise<Result> {
    try {
      return await current().request(
        { method, ...(params !== undefined && { params }) } as never,
        ResultSchema,
        requestOptions,
      );
    } catch (error) {
      throw toWireError(error, log);
    }
  }

  /** The catalog of the connection in use. */
  function currentCatalog(): PinnedCatalog {
    const client = current();
    if (catalog?.client !== client) {
      const tools = createPinnedCatalog({
        list: () => listAllTools(client),
        server: config.proxy.name,
        store: options.pinStore,
        log,
        emit: (event) => options.gateway?.onEvent?.(event),
      });
      catalog = { client, tools };
    }
    return catalog.tools;
  }

  // The session's own upstream connection, reached only through the gateway's dispatch.
  const connection: ListingConnection = {
    get facts() {
      return facts();
    },
    async find(tool) {
      // A tool the cached listing lacks may be new upstream: list once more before calling it unknown.
      const tools = currentCatalog();
      return (await tools.tools(false)).get(tool) ?? (await tools.tools(true)).get(tool);
    },
    held(tool) {
      return currentCatalog().held(tool);
    },
    async call(tool, args, context) {
      const request = inFlight.get(context);
      const params = {
        name: tool,
        arguments: args,
        ...(request && Object.keys(request.meta).length > 0 && { _meta: request.meta }),
      };
      const client = current();
      busy.set(client, (busy.get(client) ?? 0) + 1);
      try {
        return (await client.request({ method: 'tools/call', params }, ResultSchema, request?.options)) as never;
      } catch (error) {
        // An upstream protocol error is the upstream's answer: shown as an error result naming it.
        if (error instanceof ProtocolError) {
          throw new ProxyError('downstream-failed', `The upstream failed on "${tool}": ${error.message}`, {
            cause: error,
          });
        }
        throw error;
      } finally {
        const left = (busy.get(client) ?? 1) - 1;
        if (left > 0) busy.set(client, left);
        else {
          busy.delete(client);
          if (retired.delete(client)) void client.close();
        }
      }
    },
  };

  // The upstream's own requests go to this session's client, tied to the tool call in flight.
  const relay: ServerRequestRelay = {
    label: 'the upstream',
    log,
    get markers() {
      return config.policies.sensitiveRequired.enabled ? config.policies.sensitiveRequired : undefined;
    },
    get timeoutMs() {
      return config.elicitation.timeoutMs;
    },
    onRefused(reason) {
      try {
        emit({
          filter: 'upstreamElicitation',
          tool: callsInFlight.at(-1)?.tool ?? 'elicitation/create',
          decision: 'deny',
          reason,
        });
      } catch (error) {
        log(`event hook failed: ${String(error)}`);
      }
    },
    target() {
      const target = server;
      if (target === undefined || !clientReady) return { refused: 'the client has not finished initializing' };
      const related = callsInFlight.at(-1)?.id;
      return {
        capabilities: clientCapabilities,
        send: (request, requestOptions) =>
          target.request(request as never, ResultSchema, {
            ...requestOptions,
            ...(related !== undefined && { relatedRequestId: related }),
          }),
      };
    },
  };

  /** Reports one decision the face itself takes (resources, prompts, relayed requests) on the event hook. */
  function emit(event: Pick<ProxyEvent, 'filter' | 'tool' | 'decision' | 'reason'>): void {
    options.gateway?.onEvent?.({
      ts: new Date().toISOString(),
      principal: options.principal.id,
      scope: scopeDigest(options.principal, scope),
      pipeline: 'call',
      durationUs: 0,
      ...event,
    });
  }

  /** Opens an upstream connection declaring the client's capabilities, relaying its requests and notifications. */
  async function openUpstream(target: UpstreamConfig, transport?: Transport): Promise<Client> {
    const declared = mirrorClientCapabilities(clientCapabilities);
    const client = new Client(
      { name: config.proxy.name, version: config.proxy.version },
      { capabilities: declared, ...upstreamNegotiation(target) },
    );
    relayServerRequests(client, declared, relay);
    client.fallbackNotificationHandler = async (notification: Notification) => {
      // The upstream's tools changed: listed afresh (at once with pins, so a hold is logged and refused now).
      if (notification.method === 'notifications/tools/list_changed' && catalog?.client === client) {
        catalog.tools.changed();
      }
      if (client !== upstream?.client || !FORWARDED_NOTIFICATIONS.has(notification.method) || !clientReady) return;
      await server?.notification(notification as never).catch((error: unknown) => {
        log(`could not forward ${notification.method}: ${String(error)}`);
      });
    };
    client.onclose = () => {
      // Only the connection in use matters: a retired or failed one closes quietly.
      if (client !== upstream?.client || stopping) return;
      log('the upstream MCP server closed the connection');
      outcome = 'upstream-lost';
      void close();
    };
    try {
      await connectUpstream(
        client,
        target,
        transport ??
          createUpstreamTransport(target, {
            ...(options.upstreamStderr !== undefined && { stderr: options.upstreamStderr }),
          }),
      );
    } catch (error) {
      await client.close().catch(() => undefined);
      const detail = error instanceof Error ? error.message : String(error);
      throw new ProxyError(
        'downstream-unavailable',
        `Cannot connect to the upstream MCP server (${describeUpstream(target)}): ${detail}`,
        { cause: error },
      );
    }
    return client;
  }

  function registerHandlers(target: Server, capabilities: ServerCapabilities): void {
    target.setRequestHandler('tools/call', async (request, ctx) => {
      const { name, arguments: args, _meta } = request.params;
      const declared = target.getClientCapabilities() ?? {};
      const context: CallContext = {
        principal: options.principal,
        scope,
        listing: connection,
        signal: ctx.mcpReq.signal,
        ...(modeSupported(declared, 'form') && {
          // A URL ask (the approval windows) goes over the session while the call stays open, to a
          // client that declared URL mode; to any other it is one it cannot make.
          elicit: async (params) =>
            params.mode === 'url'
              ? modeSupported(declared, 'url')
                ? pushUrlAsk(ctx, params)
                : { action: 'cancel' }
              : target.elicitInput(params, {
                  // Tie the form to this tool call, so the client shows it in context (and HTTP routes it there).
                  relatedRequestId: ctx.mcpReq.id,
                  timeout: config.elicitation.timeoutMs,
                  signal: ctx.mcpReq.signal,
                }),
        }),
      };
      // Relay progress under the client's own token; the SDK puts its own token on the upstream request.
      const { progressToken, ...meta } = _meta ?? {};
      inFlight.set(context, {
        meta,
        options: {
          signal: ctx.mcpReq.signal,
          resetTimeoutOnProgress: true,
          ...(progressToken !== undefined && {
            onprogress: (progress) => {
              void ctx.mcpReq
                .notify({ method: 'notifications/progress', params: { ...progress, progressToken } })
                .catch((error: unknown) => log(`progress relay failed: ${String(error)}`));
            },
          }),
        },
      });
      const call = { id: ctx.mcpReq.id, tool: name };
      callsInFlight.push(call);
      try {
        return (await gateway.call({ tool: name, arguments: args ?? {} }, context)) as never;
      } finally {
        callsInFlight.splice(callsInFlight.indexOf(call), 1);
      }
    });

    registerListingHandlers(target, capabilities, {
      access: () => access,
      emit,
      forward: (method, params, ctx) => forward(method, params, { signal: ctx.mcpReq.signal }),
      ...(options.pinStore !== undefined && { catalog: async () => currentCatalog() }),
    });
    target.fallbackNotificationHandler = async (notification: Notification) => {
      if (!CLIENT_NOTIFICATIONS.has(notification.method)) return;
      await upstream?.client.notification(notification as never).catch((error: unknown) => {
        log(`could not forward ${notification.method}: ${String(error)}`);
      });
    };
  }

  /** The client's `initialize` arrived: open the upstream with its capabilities, then answer with the upstream's. */
  async function openSession(gate: InitializeGate, initialize: InitializeMessage): Promise<void> {
    clientCapabilities = initialize.params.capabilities ?? {};
    const target = config.upstream;
    let client: Client;
    try {
      client = await openUpstream(target, options.upstreamTransport);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      log(message);
      outcome = 'upstream-unavailable';
      await gate
        .send({ jsonrpc: '2.0', id: initialize.id, error: { code: ProtocolErrorCode.InternalError, message } })
        .catch(() => undefined);
      await close();
      return;
    }
    // Closed while the upstream was starting: do not start serving.
    if (stopping) {
      await client.close();
      return;
    }
    upstream = { client, target };
    const capabilities = mirroredCapabilities(client.getServerCapabilities() ?? {});
    const instructions = client.getInstructions();
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
    await created.connect(gate);
    gate.release();
  }

  function close(): Promise<void> {
    if (closing) return closing;
    stopping = true;
    // Assigned before anything is closed: closing a transport reports back synchronously through
    // `onclose`, which calls this again and must find the shutdown already under way (no recursion).
    closing = Promise.resolve()
      .then(() =>
        Promise.allSettled([
          server?.close(),
          upstream?.client.close(),
          ...[...retired].map((client) => client.close()),
          gateway.close(),
        ]),
      )
      .then(() => settleClosed(outcome));
    return closing;
  }

  let connected = false;
  return {
    closed,
    close,
    async readmitPins() {
      const tools = catalog?.client === upstream?.client ? catalog?.tools : undefined;
      if (tools === undefined || !(await tools.readmit()) || !clientReady) return;
      await server
        ?.sendToolListChanged()
        .catch((error: unknown) => log(`could not notify the client: ${String(error)}`));
    },
    async connect(transport) {
      if (connected) throw new Error('This transparent proxy is already connected; create one per client.');
      connected = true;
      const gate = new InitializeGate(transport);
      gate.onclose = () => void close();
      await gate.listen((initialize) => {
        void openSession(gate, initialize).catch((error: unknown) => {
          log(`could not open the session: ${error instanceof Error ? error.message : String(error)}`);
          void close();
        });
      });
    },
    async reload(next) {
      // Fallible steps first; nothing is swapped until they have worked.
      const nextGateway = transparentGateway(next, options, log);
      let fresh: Client | undefined;
      const repoint =
        upstream !== undefined &&
        options.upstreamTransport === undefined &&
        !sameUpstream(upstream.target, next.upstream);
      try {
        if (repoint) fresh = await openUpstream(next.upstream);
      } catch (error) {
        await fresh?.close().catch(() => undefined);
        await nextGateway.close();
        throw error;
      }
      if (stopping) {
        await fresh?.close();
        await nextGateway.close();
        return;
      }
      const previousGateway = gateway;
      const previous = upstream;
      config = next;
      access = listingAccess(next, options);
      gateway = nextGateway;
      if (fresh !== undefined) {
        // What may be called is what the new upstream lists: its catalog is read at the next call.
        upstream = { client: fresh, target: next.upstream };
        catalog = undefined;
        if (previous !== undefined) {
          if (busy.has(previous.client)) retired.add(previous.client);
          else void previous.client.close();
        }
      }
      void previousGateway.close();
      if (fresh !== undefined && clientReady) {
        await server
          ?.sendToolListChanged()
          .catch((error: unknown) => log(`could not notify the client: ${String(error)}`));
      }
    },
  };
}
