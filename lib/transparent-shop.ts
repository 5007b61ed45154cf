import { InMemoryServerEventBus, type Server, type ServerEventBus } from '@modelcontextprotocol/server';
import {
  type CallFilter,
  createTransparentProxy,
  createTransparentRequests,
  DEFAULT_SECRET_MARKERS,
  type DownstreamSpec,
  type GatewayOptions,
  type PinStore,
  type Principal,
  type ToolPolicy,
  type TransparentConfig,
  type TransparentProxy,
  type UpstreamConfig,
} from '../proxy/index';
import { shopServerName } from './shop-pins';

/**
 * The shop served transparently inside the household (docs/human-authority.md): the shop's own
 * tool list under its own names, each client session with its own upstream connection, and the
 * household's rules (a form for a missing delivery address, the child's passkey for a cancel).
 */
export interface TransparentShop {
  /** A transparent proxy for one 2025-11-25 client session of `principal`; connect it to that client's transport. */
  open(principal: Principal): TransparentProxy;
  /** The 2026-07-28 face: the server that answers one request (or one stdio connection) as `principal`. */
  serverFor(principal: Principal): Promise<Server>;
  /** Where the upstream's list changes go, for the 2026-07-28 clients' `subscriptions/listen` streams. */
  readonly bus: ServerEventBus;
  /** Closes every session still open and the 2026-07-28 face's upstream connections. */
  close(): Promise<void>;
}

/** What {@link createTransparentShop} needs: the shop, and the household's gate, events and pins. */
export interface TransparentShopOptions {
  /** How the household reaches its shop (a stdio child of the shop agent, or `PIZZA_URL`). */
  readonly shop: DownstreamSpec;
  /** The household's per-tool rules, keyed by qualified name (`pizza__cancel_order`): the shop's are taken, by bare name. */
  readonly tools: Readonly<Record<string, ToolPolicy>>;
  /**
   * The household's `approval_required` options (its `CallApprovalGate`, evidence ledger and audit
   * hook), the same as search mode's, and its other call filters and event hook.
   */
  readonly gateway: Pick<GatewayOptions, 'approvalRequired' | 'onEvent'> & {
    readonly extraCallFilters?: readonly CallFilter[];
  };
  /** The household's pin store: the shop's tools are admitted under `pizza`, as in search mode. */
  readonly pinStore?: PinStore;
  readonly log?: (line: string) => void;
}

/**
 * The transparent configuration of the household's shop: `proxy.name` is the shop's server name
 * (`pizza`), so a call's qualified name, and so its call hash and its window's words, are the same
 * as through search mode; the rules are the household's for that server, by the shop's own names.
 * `undefined` for a shop that runs in this process (there is no upstream to open per session).
 */
export function transparentShopConfig(
  shop: DownstreamSpec,
  tools: Readonly<Record<string, ToolPolicy>>,
): TransparentConfig | undefined {
  const upstream = upstreamOf(shop);
  if (upstream === undefined) return undefined;
  const prefix = `${shopServerName}__`;
  const own = Object.fromEntries(
    Object.entries(tools).flatMap(([name, policy]) =>
      name.startsWith(prefix) ? [[name.slice(prefix.length), policy] as const] : [],
    ),
  );
  return {
    source: 'the household (its shop, transparent)',
    proxy: { name: shopServerName, version: '0.1.0' },
    upstream,
    elicitation: { enabled: true, fallbackOnUnsupported: 'structured_error', timeoutMs: 600_000 },
    policies: {
      schemaRequired: { enabled: true },
      sensitiveRequired: { enabled: true, nameMarkers: DEFAULT_SECRET_MARKERS, schemaMarkers: DEFAULT_SECRET_MARKERS },
    },
    tools: own,
    accessControl: { deny: [], denyPatterns: [], denyResources: [], denyPrompts: [] },
  };
}

function upstreamOf(shop: DownstreamSpec): UpstreamConfig | undefined {
  if (shop.kind === 'in-process') return undefined;
  if (shop.kind === 'http') return { kind: 'http', url: shop.url, ...(shop.protocol && { protocol: shop.protocol }) };
  return {
    kind: 'stdio',
    command: shop.command,
    args: shop.args ?? [],
    env: shop.env ?? {},
    ...(shop.protocol && { protocol: shop.protocol }),
  };
}

/**
 * Opens the household's shop as a transparent proxy gated by the household: every session's
 * `cancel_order` waits for the child's passkey over exactly that call in the approval windows
 * (the same gate, ledger and audit rows as search mode's `pizza__cancel_order`). `undefined` when
 * the shop runs in this process.
 */
export function createTransparentShop(options: TransparentShopOptions): TransparentShop | undefined {
  const config = transparentShopConfig(options.shop, options.tools);
  if (config === undefined) return undefined;
  const log = options.log ?? (() => undefined);
  const gateway = options.gateway;
  const bus = new InMemoryServerEventBus();
  const shared = {
    config,
    log,
    gateway,
    ...(options.pinStore !== undefined && { pinStore: options.pinStore }),
  };
  const requests = createTransparentRequests({ ...shared, bus });
  const live = new Set<TransparentProxy>();
  return {
    bus,
    open(principal) {
      const proxy = createTransparentProxy({ ...shared, principal });
      live.add(proxy);
      void proxy.closed.then(() => live.delete(proxy));
      return proxy;
    },
    serverFor: (principal) => requests.serverFor(principal),
    async close() {
      await Promise.allSettled([...live].map((proxy) => proxy.close()));
      await requests.close();
    },
  };
}
