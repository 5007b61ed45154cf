import { Client } from '@modelcontextprotocol/client';
import { ResultSchema } from '@modelcontextprotocol/core';
import {
  type CallToolResult,
  CLIENT_CAPABILITIES_META_KEY,
  type ClientCapabilities,
  type LoggingLevel,
  ProtocolError,
  type Result,
  Server,
  type ServerCapabilities,
  type ServerContext,
  type ServerEvent,
  type ServerEventBus,
  type Transport,
} from '@modelcontextprotocol/server';
import canonicalize from 'canonicalize';
import {
  fulfilInputRounds,
  modeSupported,
  type RelayTarget,
  relayRequest,
  relayServerRequests,
  type ServerRequestRelay,
} from '../downstream/relay-server-requests';
import { ProxyError } from '../errors';
import type {
  CallContext,
  Gateway,
  ListingConnection,
  Principal,
  ProxyEvent,
  RelayRequest,
  ServerFacts,
} from '../gateway/types';
import { type InputRounds, localInputRounds } from '../meta-tools/input-rounds';
import {
  listAllTools,
  listingAccess,
  mirrorClientCapabilities,
  mirroredCapabilities,
  registerListingHandlers,
  type TransparentProxyOptions,
  transparentGateway,
} from './create-transparent-proxy';
import {
  connectUpstream,
  createUpstreamTransport,
  describeUpstream,
  upstreamNegotiation,
} from './create-upstream-transport';
import { createPinnedCatalog, type PinnedCatalog } from './pinned-catalog';
import { toWireError } from './to-wire-error';
import type { TransparentConfig } from './transparent-config';

/** Options of {@link createTransparentRequests}: a transparent proxy's, without one client's principal. */
export interface TransparentRequestsOptions extends Omit<TransparentProxyOptions, 'principal' | 'upstreamTransport'> {
  /**
   * Where the upstream's change notifications go, for the clients' `subscriptions/listen`
   * streams: the same bus as the HTTP face's handler.
   */
  readonly bus?: ServerEventBus;
  /** Opens each upstream connection's transport instead of `config.upstream` (tests link in-memory servers). */
  readonly upstreamTransport?: () => Transport | Promise<Transport>;
  /** How questions to the person travel (SPEC §3.12); default: rounds of this process. */
  readonly rounds?: InputRounds;
  /** Upstream connections kept open at once; default 16. */
  readonly maxConnections?: number;
  /** How long a reload leaves the previous configuration's connections to their calls in flight; default 60 s. */
  readonly retireAfterMs?: number;
}

/** Transparent mode's face for 2026-07-28 requests: a server per request over pooled upstream connections. */
export interface TransparentRequests {
  /**
   * The server that answers requests as `principal` (the SDK's handler builds one per request,
   * `serveStdio` one per connection). It serves under the configuration in force at each request.
   */
  serverFor(principal: Principal): Promise<Server>;
  /**
   * Applies a new configuration (SIGHUP) from the next request on, servers already built
   * included; the previous one's connections close after `retireAfterMs`, so the calls in flight
   * on them finish. Listeners are told the tools may have changed. Throws, changing nothing, when
   * the new filters cannot be built.
   */
  reload(config: TransparentConfig): void;
  /**
   * Admits each open connection's last listing again against the pin store as it is now (SIGHUP,
   * after `pins accept`); listeners are told the tools changed when what they may see did.
   */
  readmitPins(): Promise<void>;
  close(): Promise<void>;
}

/** The upstream's list notifications, as the change events of `subscriptions/listen`. */
const LIST_CHANGES: Readonly<Record<string, 'tools_list_changed' | 'prompts_list_changed' | 'resources_list_changed'>> =
  {
    'notifications/tools/list_changed': 'tools_list_changed',
    'notifications/prompts/list_changed': 'prompts_list_changed',
    'notifications/resources/list_changed': 'resources_list_changed',
  };

/**
 * Delivers the bus's list changes through `server`'s own connection, for a face that keeps one
 * server per connection: `serveStdio` takes no bus, and routes its pinned instance's list-changed
 * notifications onto the client's `subscriptions/listen` streams. Stops when the server closes.
 */
export function relayChangeEvents(bus: ServerEventBus, server: Server, log: (line: string) => void): void {
  const send: Record<ServerEvent['kind'], (() => Promise<void>) | undefined> = {
    tools_list_changed: () => server.sendToolListChanged(),
    prompts_list_changed: () => server.sendPromptListChanged(),
    resources_list_changed: () => server.sendResourceListChanged(),
    // A resource update names one subscription's URI and is never broadcast (see LIST_CHANGES).
    resource_updated: undefined,
  };
  const unsubscribe = bus.subscribe((event) => {
    void send[event.kind]?.().catch((error: unknown) => log(`could not notify the client: ${String(error)}`));
  });
  const previous = server.onclose;
  server.onclose = () => {
    unsubscribe();
    previous?.();
  };
}

/** What one configuration decides: its filters and its upstream connections. A reload replaces it whole. */
interface Generation {
  readonly config: TransparentConfig;
  readonly gateway: Gateway;
  readonly access: ReturnType<typeof listingAccess>;
  readonly facts: ServerFacts;
  readonly pool: Map<string, Promise<Pooled>>;
  /** What the upstream offers and says, learned from the first connection. */
  shaped: Promise<{ capabilities: ServerCapabilities; instructions: string | undefined }> | undefined;
  /** The upstream speaks 2026-07-28 (learned from the first connection): one connection serves all. */
  modern: boolean;
}

/**
 * One upstream connection: for a 2025 upstream, shared by the requests of one principal that
 * declare the same capabilities; for a 2026 upstream, by every request (`shared`), each carrying
 * its own client's capabilities.
 */
interface Pooled {
  readonly client: Client;
  readonly shared: boolean;
  /** How the upstream's own requests are answered on this connection. */
  readonly relay: ServerRequestRelay;
  /** The upstream's tools as last listed here and admitted: what a call is stamped from and `tools/list` shows. */
  readonly catalog: PinnedCatalog;
  used: number;
  busy: number;
  /** The calls in flight here: whom the upstream's own requests and log messages are for. */
  readonly calls: Set<InFlight>;
}

/** A `tools/call` on its way upstream, with what reaches its client while it runs. */
interface InFlight {
  readonly signal: AbortSignal;
  /** What the call's client declared (mirrored): what the upstream may ask it. */
  readonly declared: ClientCapabilities;
  /** Holds the upstream's requests for the client; absent when the client cannot be asked. */
  readonly relay?: RelayRequest | undefined;
  /** Passes on the upstream's progress and log messages, on the client's request stream. */
  readonly notify: (notification: { method: string; params: Record<string, unknown> }) => void;
  readonly progressToken?: string | number | undefined;
}

/**
 * What a shared connection to a 2026 upstream declares: everything a client may. Each request
 * tells the upstream its own client's capabilities, and a relayed request is checked against them.
 */
const EVERY_CAPABILITY: ClientCapabilities = { elicitation: { form: {}, url: {} }, sampling: {}, roots: {} };

/** Where the upstream's requests during `call` go: its client, held as input rounds. */
function targetOf(call: InFlight): RelayTarget {
  return call.relay === undefined
    ? { refused: 'the calling client cannot be asked' }
    : { send: call.relay, capabilities: call.declared };
}

/** What the request's client declared, from the request's own `_meta` envelope (2026-07-28). */
function declaredBy(ctx: ServerContext): ClientCapabilities {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  return (envelope?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined) ?? {};
}

/**
 * Transparent mode for 2026-07-28 clients (SPEC §3.10, docs/protocol.md): no session, so each
 * request is served on its own, as the principal the face proved, through the same listing
 * filters, call pipeline and elicitation as a 2025 session. The upstream is reached through a
 * bounded pool keyed by (principal, declared capabilities): a 2025 upstream fixes a connection's
 * capabilities at `initialize`, and one principal's connection never serves another. A filter's
 * question is an input round (`input_required`), and so is each of the upstream's own requests
 * during a call, held in this process until the client's retry answers it; its progress and log
 * messages go out on the request's stream.
 */
export function createTransparentRequests(options: TransparentRequestsOptions): TransparentRequests {
  const log = options.log ?? (() => undefined);
  const rounds = options.rounds ?? localInputRounds();
  const maxConnections = options.maxConnections ?? 16;
  // The filters are the host's and the file's; no one principal is theirs (each request names its own).
  const host: TransparentProxyOptions = {
    config: options.config,
    principal: { id: 'anonymous' },
    ...(options.pinStore !== undefined && { pinStore: options.pinStore }),
    ...(options.gateway !== undefined && { gateway: options.gateway }),
  };
  let clock = 0;

  function generation(config: TransparentConfig): Generation {
    return {
      config,
      gateway: transparentGateway(config, host, log),
      access: listingAccess(config, host),
      facts: {
        name: config.proxy.name,
        admission: 'config',
        ...(config.upstream.kind === 'http' && { url: config.upstream.url }),
      },
      pool: new Map(),
      shaped: undefined,
      // Pinned, it is known before the first connection; with `auto`, the first one tells.
      modern: config.upstream.protocol === '2026-07-28',
    };
  }
  let current = generation(options.config);
  /** Generations replaced by a reload, until their connections close. */
  const retiring = new Set<Generation>();

  async function retire(retired: Generation): Promise<void> {
    if (!retiring.delete(retired)) return;
    const entries = await Promise.all([...retired.pool.values()].map((entry) => entry.catch(() => undefined)));
    retired.pool.clear();
    await Promise.allSettled(entries.map((pooled) => pooled?.client.close()));
    await retired.gateway.close();
  }

  async function open(serving: Generation, declared: ClientCapabilities, shared: boolean): Promise<Pooled> {
    const { config } = serving;
    const client = new Client(
      { name: config.proxy.name, version: config.proxy.version },
      { capabilities: declared, ...upstreamNegotiation(config.upstream) },
    );
    // The upstream's own requests go to the call that got them, which holds them for its client as
    // input rounds. A 2025 upstream's arrive on the connection: they are the one call's in flight,
    // and with several the asker is unknown. A 2026 upstream's come back in a call's result, and
    // a shared connection answers them for that call (see `listing`).
    const relay: ServerRequestRelay = {
      label: 'the upstream',
      log,
      markers: config.policies.sensitiveRequired.enabled ? config.policies.sensitiveRequired : undefined,
      timeoutMs: config.elicitation.timeoutMs,
      onRefused: (reason) => log(`upstream request refused: ${reason}`),
      target: () => {
        const [only, ...others] = pooled.calls;
        if (only === undefined) return { refused: 'no call is in progress on this connection' };
        if (others.length > 0) {
          return { refused: `${pooled.calls.size} calls are in progress; the proxy cannot tell which one asked` };
        }
        return targetOf(only);
      },
    };
    const catalog = createPinnedCatalog({
      list: () => listAllTools(client),
      server: config.proxy.name,
      store: options.pinStore,
      log,
      emit: (event) => options.gateway?.onEvent?.(event),
    });
    const pooled: Pooled = { client, shared, relay, catalog, used: ++clock, busy: 0, calls: new Set() };
    relayServerRequests(client, declared, relay);
    client.fallbackNotificationHandler = async (notification) => {
      // A log message is the one call's in flight; with several, whose it is cannot be told.
      const [only, ...others] = pooled.calls;
      if (notification.method === 'notifications/message' && only !== undefined && others.length === 0) {
        only.notify(notification as never);
      }
      if (notification.method === 'notifications/tools/list_changed') pooled.catalog.changed();
      // A listing changed upstream: every listener hears it (the upstream is the deployment's).
      // `resources/updated` names a subscription's URI and stays with its connection.
      const changed = LIST_CHANGES[notification.method];
      if (changed !== undefined) options.bus?.publish({ kind: changed });
    };
    try {
      await connectUpstream(
        client,
        config.upstream,
        (await options.upstreamTransport?.()) ??
          createUpstreamTransport(config.upstream, { stderr: options.upstreamStderr ?? 'inherit' }),
      );
      serving.modern ||= client.getProtocolEra() === 'modern';
    } catch (error) {
      await client.close().catch(() => undefined);
      throw new ProxyError(
        'downstream-unavailable',
        `Cannot connect to the upstream MCP server (${describeUpstream(config.upstream)}): ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    }
    return pooled;
  }

  /**
   * The connection for this principal and these capabilities, opened on first use: the shared one
   * once the upstream is known to speak 2026, else the pooled one, the least recently used idle
   * one making room.
   */
  async function connection(
    serving: Generation,
    principal: Principal,
    capabilities: ClientCapabilities,
  ): Promise<Pooled> {
    const { pool, modern } = serving;
    const declared = modern ? EVERY_CAPABILITY : mirrorClientCapabilities(capabilities);
    const key = modern ? '' : `${principal.id}\u0000${canonicalize(declared)}`;
    let entry = pool.get(key);
    if (entry === undefined) {
      entry = open(serving, declared, modern);
      pool.set(key, entry);
      entry.catch(() => pool.delete(key));
      void evict(pool, key);
    }
    const pooled = await entry;
    pooled.used = ++clock;
    return pooled;
  }

  async function evict(pool: Map<string, Promise<Pooled>>, keep: string): Promise<void> {
    while (pool.size > maxConnections) {
      const settled = await Promise.all(
        [...pool]
          .filter(([key]) => key !== keep)
          .map(async ([key, entry]) => [key, await entry.catch(() => undefined)] as const),
      );
      const idle = settled
        .filter((item): item is readonly [string, Pooled] => item[1] !== undefined && item[1].busy === 0)
        .sort((left, right) => left[1].used - right[1].used)[0];
      if (idle === undefined) return;
      pool.delete(idle[0]);
      await idle[1].client.close().catch(() => undefined);
    }
  }

  /** Sends one request upstream; on a shared connection it tells the upstream its own client's capabilities. */
  async function request(
    pooled: Pooled,
    method: string,
    params: Record<string, unknown> | undefined,
    options: {
      readonly signal: AbortSignal;
      readonly declared: ClientCapabilities;
      readonly onprogress?: ((progress: Record<string, unknown>) => void) | undefined;
      /** Return a 2026 upstream's `input_required` instead of letting the SDK client fulfil it. */
      readonly allowInputRequired?: boolean;
    },
  ): Promise<Result> {
    const { signal, onprogress } = options;
    const sent = pooled.shared
      ? {
          ...params,
          _meta: { ...(params?._meta as object | undefined), [CLIENT_CAPABILITIES_META_KEY]: options.declared },
        }
      : params;
    pooled.busy += 1;
    try {
      return await pooled.client.request(
        { method, ...(sent !== undefined && { params: sent }) } as never,
        ResultSchema,
        {
          signal,
          ...(onprogress !== undefined && { onprogress, resetTimeoutOnProgress: true }),
          ...(options.allowInputRequired === true && { allowInputRequired: true }),
        },
      );
    } catch (error) {
      throw toWireError(error, log);
    } finally {
      pooled.busy -= 1;
    }
  }

  /**
   * `tools/call` upstream for `call`. The proxy fulfils a 2026 upstream's `input_required` itself,
   * each question through `call`'s own client (on a shared connection the SDK client's fulfilment
   * could not tell concurrent calls apart, and it would report its rounds as progress), then
   * retries with the answers and the upstream's request state.
   */
  async function callUpstream(
    pooled: Pooled,
    tool: string,
    args: Record<string, unknown>,
    call: InFlight & { readonly onprogress?: ((progress: Record<string, unknown>) => void) | undefined },
  ): Promise<CallToolResult> {
    const asked = { name: tool, arguments: args };
    const send = (params: Record<string, unknown>) =>
      request(pooled, 'tools/call', params, { ...call, allowInputRequired: true });
    const result = await fulfilInputRounds(
      await send(asked),
      (entry) => relayRequest(pooled.relay, targetOf(call), entry, call.signal),
      (answers) => send({ ...asked, ...answers }),
      (rounds) =>
        new ProxyError('downstream-failed', `The upstream asked for input in more than ${rounds} rounds of "${tool}".`),
    );
    return result as CallToolResult;
  }

  /** The pooled connection as the gateway's listing (SPEC §3.5): what it lists now is callable. */
  function listing(facts: ServerFacts, pooled: Pooled, call: InFlight): ListingConnection {
    const { catalog } = pooled;
    return {
      facts,
      async find(tool) {
        return (await catalog.tools(false)).get(tool) ?? (await catalog.tools(true)).get(tool);
      },
      held(tool) {
        return catalog.held(tool);
      },
      async call(tool, args) {
        // Progress goes back under the client's own token; the SDK puts its own on the upstream request.
        const { progressToken } = call;
        const onprogress =
          progressToken === undefined
            ? undefined
            : (progress: Record<string, unknown>) =>
                call.notify({ method: 'notifications/progress', params: { ...progress, progressToken } });
        pooled.calls.add(call);
        try {
          return await callUpstream(pooled, tool, args, { ...call, onprogress });
        } catch (error) {
          if (error instanceof ProtocolError) {
            throw new ProxyError('downstream-failed', `The upstream failed on "${tool}": ${error.message}`, {
              cause: error,
            });
          }
          throw error;
        } finally {
          pooled.calls.delete(call);
        }
      },
    };
  }

  /** The upstream's capabilities (what the proxy relays of them) and instructions, learned once. */
  function shape(serving: Generation, principal: Principal) {
    serving.shaped ??= connection(serving, principal, {}).then((pooled) => ({
      capabilities: mirroredCapabilities(pooled.client.getServerCapabilities() ?? {}),
      instructions: pooled.client.getInstructions(),
    }));
    const shaped = serving.shaped;
    shaped.catch(() => {
      if (serving.shaped === shaped) serving.shaped = undefined;
    });
    return shaped;
  }

  return {
    async serverFor(principal) {
      const { config } = current;
      const { capabilities, instructions } = await shape(current, principal);
      const scope = { kind: 'handle' } as const;
      const emit = (event: Pick<ProxyEvent, 'filter' | 'tool' | 'decision' | 'reason'>) =>
        options.gateway?.onEvent?.({
          ts: new Date().toISOString(),
          principal: principal.id,
          scope: 'none',
          pipeline: 'call',
          durationUs: 0,
          ...event,
        });
      const server = new Server(
        { name: config.proxy.name, version: config.proxy.version },
        { capabilities, ...(instructions !== undefined && { instructions }), requestState: { verify: rounds.verify } },
      );
      // Each request reads the configuration in force then: a server `serveStdio` keeps for the
      // connection follows a reload as the HTTP face's per-request servers do.
      registerListingHandlers(server, capabilities, {
        access: () => current.access,
        emit,
        forward: async (method, params, ctx) => {
          const declared = declaredBy(ctx);
          return request(await connection(current, principal, declared), method, params as never, {
            signal: ctx.mcpReq.signal,
            declared: mirrorClientCapabilities(declared),
          });
        },
        ...(options.pinStore !== undefined && {
          catalog: async (ctx: ServerContext) => (await connection(current, principal, declaredBy(ctx))).catalog,
        }),
      });
      server.setRequestHandler('tools/call', async (call, ctx) => {
        const serving = current;
        const declared = declaredBy(ctx);
        const pooled = await connection(serving, principal, declared);
        const { name, arguments: args } = call.params;
        return rounds.run(
          ctx,
          { principal, method: 'tools/call', name, arguments: args },
          { canAsk: modeSupported(declared, 'form'), canAskUrl: modeSupported(declared, 'url'), hold: true },
          async ({ elicit, relay, signal, retryOf }) => {
            const context: CallContext = {
              principal,
              scope,
              listing: listing(serving.facts, pooled, {
                signal,
                declared: mirrorClientCapabilities(declared),
                relay,
                progressToken: call.params._meta?.progressToken,
                // A log message goes at the level the client asked for in this request.
                notify: ({ method, params }) =>
                  void (
                    method === 'notifications/message'
                      ? ctx.mcpReq.log(params.level as LoggingLevel, params.data, params.logger as string | undefined)
                      : ctx.mcpReq.notify({ method, params } as never)
                  ).catch((error: unknown) => log(`could not pass on ${method}: ${String(error)}`)),
              }),
              signal,
              ...(elicit && { elicit }),
              ...(retryOf !== undefined && { retryOf }),
            };
            return serving.gateway.call({ tool: name, arguments: args ?? {} }, context);
          },
        );
      });
      return server;
    },
    reload(config) {
      const previous = current;
      current = generation(config);
      retiring.add(previous);
      setTimeout(() => void retire(previous), options.retireAfterMs ?? 60_000).unref();
      // The new upstream's tools may differ: listeners list again.
      options.bus?.publish({ kind: 'tools_list_changed' });
    },
    async readmitPins() {
      const open = await Promise.all([...current.pool.values()].map((entry) => entry.catch(() => undefined)));
      const changed = await Promise.all(open.map((pooled) => pooled?.catalog.readmit() ?? false));
      if (changed.includes(true)) options.bus?.publish({ kind: 'tools_list_changed' });
    },
    async close() {
      retiring.add(current);
      await Promise.all([...retiring].map(retire));
    },
  };
}
