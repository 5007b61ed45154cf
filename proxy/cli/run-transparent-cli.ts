import { userInfo } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { InMemoryServerEventBus, Server, type ServerEventBus, type Transport } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { ProxyError } from '../errors';
import type { Principal } from '../gateway/types';
import { type InboundToken, readInboundTokens } from '../http/inbound-tokens';
import { serveSessions } from '../http/serve-http';
import { createStatelessLeg } from '../meta-tools/stateless-search-mode-server';
import { acquirePidFile, type HeldPidFile } from '../pid-file';
import { readPinsFile, seedPins } from '../pins/pins-file';
import type { PinStore } from '../pins/types';
import { createTransparentProxy, type TransparentProxy } from '../transparent/create-transparent-proxy';
import { describeUpstream } from '../transparent/create-upstream-transport';
import { loadTransparentConfig } from '../transparent/load-transparent-config';
import type { TransparentConfig } from '../transparent/transparent-config';
import {
  createTransparentRequests,
  relayChangeEvents,
  type TransparentRequests,
} from '../transparent/transparent-requests';
import { shutdownDrainMs } from './shutdown';
import { StdioTransport } from './stdio-transport';
import { describeStore, openPinStore, parseStoreUrl, type StoreLocation } from './store-url';
import { readTransparentEnv } from './transparent-env';

/** Where the CLI reads and writes; defaults to the process's own streams and environment. */
export interface TransparentCliIo {
  readonly stdin?: Readable;
  readonly stdout?: Writable;
  readonly stderr?: Writable;
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/** Exit codes: 0 clean shutdown, 1 runtime failure (upstream unreachable or gone), 2 usage or configuration error. */
export const TRANSPARENT_EXIT = { ok: 0, failed: 1, usage: 2 } as const;

const HELP = `Usage: mcp-elicitation-proxy --config FILE [--http [--port N] [--host H]]
       extensible-mcp --config FILE.yaml [--http ...]

Serves one upstream MCP server with its own tools/list unchanged, and asks the user (MCP form
elicitation) for missing required arguments before forwarding a tools/call. Secret-looking
required fields are never asked for through a form, by the proxy or by the upstream.

The proxy is invisible in both directions, for clients of MCP 2025-11-25 and 2026-07-28 alike,
on stdio and over HTTP; the client's first message picks the version:
  2025-11-25  each client session gets its own upstream connection, opened after the client's
              initialize and declaring the client's own elicitation, sampling and roots
              capabilities; the upstream's requests (elicitation/create, sampling/createMessage,
              roots/list, ping) are relayed to that client, tied to the tool call in flight.
  2026-07-28  no session: each request is served on its own, over one shared connection to a
              2026 upstream, or a small pool of connections to a 2025 one (one per principal
              and declared capabilities); a missing argument is asked for as
              input_required, and so is each of the upstream's own requests during the call
              (the call waits in this process for the answer); progress and log messages go
              with the request, list changes to the client's subscriptions/listen stream.
An upstream form asking for a secret is declined and never shown; the reason is logged.

Options:
  -c, --config FILE    The YAML configuration (mcp-elicitation-proxy format).
                       Default: $MCP_ELICITATION_PROXY_CONFIG.
  --http               Serve Streamable HTTP at /mcp instead of stdio: one upstream connection
                       (a stdio upstream is one child process) per 2025 client session.
  --port N             HTTP port (default 3333).
  --host H             HTTP bind address (default 127.0.0.1). Host and Origin headers are checked.
  --allowed-host H:P   Also accept this Host header (repeatable), e.g. behind a reverse proxy.
  --max-sessions N     HTTP sessions (and so upstream connections) open at once (default 16); a new
                       one closes the least recently used idle session, or is refused when all are busy.
  --store URL          Where tool definitions are pinned: sqlite:FILE (default: proxy.sqlite beside
                       the config, shared with extensible-mcp pins) or memory: (for this process only).
  --http-tokens FILE   Inbound clients' bearer tokens for --http (name=token lines; each token 16+
                       characters): a client must present one, and its name is its principal. Without
                       it there is no authentication: every HTTP client is the principal "anonymous".
  -h, --help           Show this help.

Calls: a client may call any tool the upstream lists without listing first (clients cache lists);
what filters.access_control hides (tools, deny_resources, deny_prompts) is neither listed nor
callable, and each refusal is an event.

Tool pinning: the upstream's first listing is pinned in the store under proxy.name (every
definition, hashed). A later definition that differs, or a new tool name, is left out of tools/list
and refused if called, named in the log, until the operator runs
extensible-mcp pins accept <proxy.name> <tool> --config FILE; that command signals this proxy (its
pid file, FILE.pid), which checks the listings again and tells its clients the list changed.
A "pins: pins.json" line in the YAML (beside it) fixes the upstream's hashes ahead of its first listing
({"servers": {"<proxy.name>": {"<tool>": "<sha256>"}}}, as pins list --json prints them).

Reload: SIGHUP re-reads the config. The next call uses the new elicitation policy, and a changed
upstream is re-pointed (a new connection per session; the old one closes when its calls end; a
2026 client's next request uses new connections). A config that no longer loads, or an upstream
that cannot be reached, keeps the running config and logs why.

Exit codes: 0 shut down cleanly, 1 upstream unreachable or closed, 2 bad usage or configuration.
Logs go to stderr; over stdio, stdout carries the MCP protocol.
`;

interface TransparentFlags {
  readonly config?: string | undefined;
  readonly help?: boolean | undefined;
  readonly http?: boolean | undefined;
  readonly port?: string | undefined;
  readonly host?: string | undefined;
  readonly 'allowed-host'?: string[] | undefined;
  readonly 'max-sessions'?: string | undefined;
  readonly 'http-tokens'?: string | undefined;
  readonly store?: string | undefined;
}

function wholeNumber(value: string | undefined, fallback: number, minimum: number): number | undefined {
  if (value === undefined) return fallback;
  const number = Number(value);
  return Number.isInteger(number) && number >= minimum && number <= 65_535 ? number : undefined;
}

/**
 * The `mcp-elicitation-proxy` command (SPEC §3.10, §3.11): parses its flags, loads and validates
 * the YAML, and serves stdio (one client, of either protocol version) or Streamable HTTP (2025
 * sessions, bounded, and 2026 requests) until stopped; SIGHUP reloads the config in place.
 * Returns the process exit code; the composition root for this mode.
 */
export async function runTransparentCli(argv: readonly string[], io: TransparentCliIo = {}): Promise<number> {
  const stdin = io.stdin ?? process.stdin;
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  const say = (line: string) => stderr.write(`mcp-elicitation-proxy: ${line}\n`);

  let flags: TransparentFlags;
  try {
    flags = parseArgs({
      args: [...argv],
      options: {
        config: { type: 'string', short: 'c' },
        help: { type: 'boolean', short: 'h' },
        http: { type: 'boolean' },
        port: { type: 'string' },
        host: { type: 'string' },
        'allowed-host': { type: 'string', multiple: true },
        'max-sessions': { type: 'string' },
        'http-tokens': { type: 'string' },
        store: { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (error) {
    say(`${error instanceof Error ? error.message : String(error)}\n\n${HELP}`);
    return TRANSPARENT_EXIT.usage;
  }
  if (flags.help === true) {
    stdout.write(HELP);
    return TRANSPARENT_EXIT.ok;
  }
  const port = wholeNumber(flags.port, 3333, 0);
  const maxSessions = wholeNumber(flags['max-sessions'], 16, 1);
  if (port === undefined || maxSessions === undefined) {
    say(`${port === undefined ? '--port' : '--max-sessions'} expects a whole number`);
    return TRANSPARENT_EXIT.usage;
  }
  if (
    flags.http !== true &&
    (flags.port ?? flags.host ?? flags['max-sessions'] ?? flags['allowed-host'] ?? flags['http-tokens']) !== undefined
  ) {
    say('--port, --host, --allowed-host, --max-sessions and --http-tokens need --http');
    return TRANSPARENT_EXIT.usage;
  }
  const env = readTransparentEnv(io.env);
  const configPath = flags.config ?? env.configPath;
  if (configPath === undefined || configPath.trim() === '') {
    say('no configuration: pass --config FILE or set MCP_ELICITATION_PROXY_CONFIG');
    return TRANSPARENT_EXIT.usage;
  }

  let config: TransparentConfig;
  let inboundTokens: readonly InboundToken[] | undefined;
  let store: StoreLocation;
  try {
    config = await loadTransparentConfig(configPath, env.variables);
    if (flags['http-tokens'] !== undefined) inboundTokens = readInboundTokens(flags['http-tokens']);
    // The same store as search mode's, found the same way, so extensible-mcp pins --config finds it.
    store = parseStoreUrl(flags.store, configPath);
  } catch (error) {
    if (ProxyError.isInstance(error)) {
      say(error.message);
      return TRANSPARENT_EXIT.usage;
    }
    throw error;
  }

  // Tool pins (SPEC §3.13): the upstream is pinned under proxy.name, so `pins diff <proxy.name>` reviews it.
  let pinStore: PinStore;
  try {
    pinStore = await openPinStore(store);
  } catch (error) {
    if (!ProxyError.isInstance(error)) throw error;
    say(error.message);
    return TRANSPARENT_EXIT.usage;
  }
  say(`store: ${describeStore(store)}; the upstream's tools are pinned as server "${config.proxy.name}"`);
  if (store.kind === 'memory') {
    say('pins: memory: tool pins live for this process only; every start trusts the first listing again');
  }
  // The config's pins file fixes the upstream's hashes ahead of its first listing, as in search
  // mode: a differing hash or a name the file does not hold is held, and the log names it. Read at
  // start only; a malformed file is a config error.
  if (config.pins !== undefined) {
    try {
      const file = readPinsFile(config.pins);
      const seeded = await seedPins(pinStore, file);
      say(
        `pins file: ${config.pins} (${seeded.seeded.length} servers fixed ahead of first use${seeded.known.length ? `; already pinned in the store, kept: ${seeded.known.join(', ')}` : ''})`,
      );
      if (!Object.hasOwn(file.servers, config.proxy.name)) {
        say(
          `pins file: it names no server "${config.proxy.name}" (proxy.name): the upstream's first listing is pinned as it comes`,
        );
      }
    } catch (error) {
      await pinStore.close();
      if (!ProxyError.isInstance(error)) throw error;
      say(error.message);
      return TRANSPARENT_EXIT.usage;
    }
  }
  const live = new Set<TransparentProxy>();
  // The face for 2026-07-28 requests, on either transport. The upstream's list changes reach 2026
  // clients' listen streams through one bus (SPEC §3.11).
  const bus = new InMemoryServerEventBus();
  const requests = createTransparentRequests({ config, log: say, bus, pinStore });
  const open = (principal: Principal): TransparentProxy => {
    const proxy = createTransparentProxy({ config, principal, log: say, pinStore });
    live.add(proxy);
    void proxy.closed.then(() => live.delete(proxy));
    return proxy;
  };

  // SIGHUP re-reads the config; reloads run one at a time. The handler exists from here on, since
  // SIGHUP's default action would kill the proxy.
  let reloading: Promise<void> = Promise.resolve();
  const onHangup = () => {
    say('SIGHUP: re-reading the config');
    reloading = reloading.then(reload).then(readmit);
  };
  /** Re-reads the config and applies it to every session and to the 2026 face. */
  const reload = async () => {
    let next: TransparentConfig;
    try {
      next = await loadTransparentConfig(configPath, env.variables);
    } catch (error) {
      say(
        `reload failed, still running the previous config: ${error instanceof Error ? error.message : String(error)}`,
      );
      return;
    }
    const outcomes = await Promise.allSettled([...live].map((proxy) => proxy.reload(next)));
    const failures = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason] : []));
    if (failures.length > 0) {
      const reason = failures[0] instanceof Error ? failures[0].message : String(failures[0]);
      say(
        `reload failed for ${failures.length} of ${outcomes.length} sessions, which keep the previous config: ${reason}`,
      );
      return;
    }
    config = next;
    // 2026 requests use the new config from the next request on; the old connections close
    // after a grace that lets the calls in flight on them finish.
    requests.reload(next);
    say(`reloaded: serving ${describeUpstream(config.upstream)} as "${config.proxy.name}"`);
  };
  /**
   * Every upstream connection's last listing admitted again against the store as it is now, even
   * when the config no longer loads: how `pins accept` reaches this process without a restart.
   */
  const readmit = async () => {
    await Promise.allSettled([...[...live].map((proxy) => proxy.readmitPins()), requests.readmitPins()]);
    say("pins: re-checked the upstream's listings against the store");
  };
  process.on('SIGHUP', onHangup);
  // On a store replicas share, a decision recorded through any of them reaches this one too.
  const unwatchPins = pinStore.watch?.(() => {
    reloading = reloading.then(readmit);
  });
  // The pid file lets `pins accept` signal this process. Several stdio proxies may serve one config
  // (one per client): the first holds it, the others re-check their pins at their own SIGHUP.
  let pidFile: HeldPidFile | undefined;
  try {
    pidFile = acquirePidFile(configPath);
  } catch (error) {
    if (!ProxyError.isInstance(error)) throw error;
    say(
      `another proxy holds the pid file of ${configPath}: pins accept signals that one; this one re-checks its pins at its own SIGHUP`,
    );
  }
  try {
    return flags.http === true
      ? await serveOverHttp({
          open,
          live,
          requests,
          bus,
          say,
          host: flags.host ?? '127.0.0.1',
          port,
          maxSessions,
          allowedHosts: flags['allowed-host'] ?? [],
          ...(inboundTokens !== undefined && { inboundTokens }),
          describe: () => describeUpstream(config.upstream),
        })
      : await serveOverStdio({
          open,
          requests,
          bus,
          stdin,
          stdout,
          say,
          describe: () => `${describeUpstream(config.upstream)} as "${config.proxy.name}"`,
        });
  } finally {
    process.off('SIGHUP', onHangup);
    unwatchPins?.();
    pidFile?.release();
    await reloading;
    await pinStore.close();
  }
}

/**
 * A 2025 transparent session as the instance `serveStdio` pins to the connection. The session must
 * read the client's `initialize` before it has a server to answer with (it opens the upstream
 * first, declaring the client's capabilities), so it takes the connection's channel itself: of a
 * 2025 instance, `serveStdio` uses only `connect` and `close`.
 */
class SessionInstance extends Server {
  readonly #session: TransparentProxy;

  constructor(session: TransparentProxy) {
    super({ name: 'transparent-session', version: '1' });
    this.#session = session;
  }

  override connect(transport: Transport): Promise<void> {
    return this.#session.connect(transport);
  }

  override close(): Promise<void> {
    return this.#session.close();
  }
}

/**
 * This process's stdio, until the client, a signal or (for a 2025 session) the upstream ends it.
 * The opening message picks the protocol version (`serveStdio`): a 2025 `initialize` gets a
 * session, a 2026-07-28 request the per-request face, whose pinned server hears the bus.
 */
async function serveOverStdio(options: {
  readonly open: (principal: Principal) => TransparentProxy;
  readonly requests: TransparentRequests;
  readonly bus: ServerEventBus;
  readonly stdin: Readable;
  readonly stdout: Writable;
  readonly say: (line: string) => void;
  readonly describe: () => string;
}): Promise<number> {
  const { requests, say } = options;
  // On stdio the client is whoever runs the proxy: the local user (SPEC §3.5).
  const principal = { id: `user:${userInfo().username}` };
  // The proxy's own transport: an oversized or malformed line is answered, not fatal.
  const transport = new StdioTransport({ stdin: options.stdin, stdout: options.stdout });
  let session: TransparentProxy | undefined;
  const connection = serveStdio(
    async ({ era }) => {
      if (era === 'legacy') {
        const opened = options.open(principal);
        session = opened;
        // The session is the connection: when it ends (its upstream lost), so does the connection.
        void opened.closed.then(() => connection.close());
        return new SessionInstance(opened);
      }
      const server = await requests.serverFor(principal);
      relayChangeEvents(options.bus, server, say);
      return server;
    },
    { transport, onerror: (error) => say(error.message) },
  );
  say(`serving ${options.describe()} (transparent mode, stdio)`);
  // End of stdin, or one signal, is one orderly shutdown: new requests are refused, those read are
  // answered (for a while), then the connection closes its instance, then the transport.
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    void transport.drain(shutdownDrainMs).then(() => connection.close());
  };
  void transport.ended.then(stop);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    await transport.closed;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
  const outcome = (await session?.closed) ?? 'closed';
  await requests.close();
  return outcome === 'closed' ? TRANSPARENT_EXIT.ok : TRANSPARENT_EXIT.failed;
}

/** Streamable HTTP: one proxy (and one upstream connection) per client session, bounded. */
async function serveOverHttp(options: {
  readonly open: (principal: Principal) => TransparentProxy;
  readonly live: ReadonlySet<TransparentProxy>;
  /** The face for 2026-07-28 requests, and the bus of their change events. */
  readonly requests: TransparentRequests;
  readonly bus: ServerEventBus;
  readonly say: (line: string) => void;
  readonly host: string;
  readonly port: number;
  readonly maxSessions: number;
  readonly allowedHosts: readonly string[];
  readonly inboundTokens?: readonly InboundToken[];
  readonly describe: () => string;
}): Promise<number> {
  const { say } = options;
  const endpoint = await serveSessions(
    (transport, principal) => options.open(principal).connect(transport),
    {
      host: options.host,
      port: options.port,
      maxSessions: options.maxSessions,
      maxSessionsPerAddress: options.maxSessions,
      allowedHosts: options.allowedHosts,
      ...(options.inboundTokens !== undefined && { inboundTokens: options.inboundTokens }),
    },
    // 2026-07-28 requests: no session, a server per request over the pooled upstream connections.
    createStatelessLeg((principal) => options.requests.serverFor(principal), { bus: options.bus }),
  );
  say(
    `serving ${options.describe()} at ${endpoint.url} (transparent mode, Streamable HTTP, at most ${options.maxSessions} sessions)`,
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  say('shutting down');
  await endpoint.drain(shutdownDrainMs);
  await endpoint.close();
  await Promise.allSettled([...options.live].map((proxy) => proxy.close()));
  await options.requests.close();
  return TRANSPARENT_EXIT.ok;
}
