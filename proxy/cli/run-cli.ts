import { userInfo } from 'node:os';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { loadConfig, resolveConfigPath } from '../config';
import { createTokenCredentials, resolveTokensPath } from '../credentials/index';
import { ProxyError } from '../errors';
import { gatewayOptionsFromConfig } from '../from-config';
import { createGateway, type GatewayOptions } from '../gateway/create-gateway';
import type { Gateway } from '../gateway/types';
import { type InboundToken, readInboundTokens } from '../http/inbound-tokens';
import { serveHttp } from '../http/serve-http';
import { createSearchModeServer } from '../meta-tools/search-mode-server';
import { acquirePidFile, type HeldPidFile } from '../pid-file';
import { readPinsFile, seedPins } from '../pins/index';
import { regoPolicyFilter } from '../policy/index';
import { runAddServer } from './add-server';
import { readProxyEnv } from './env';
import { reloadServers } from './reload-servers';
import { runPins } from './run-pins';
import { runTransparentCli } from './run-transparent-cli';
import { shutdownDrainMs } from './shutdown';
import { StdioTransport } from './stdio-transport';
import { describeStore, openProxyStores, type ProxyStores, parseStoreUrl } from './store-url';

const help = `extensible-mcp: an MCP proxy that enforces security in code, not in the model.

Usage:
  extensible-mcp [--config FILE] [--http [--port N] [--host H]] [options]
  extensible-mcp --config FILE.yaml [--http ...]
                                       Transparent mode (mcp-elicitation-proxy config;
                                       see mcp-elicitation-proxy --help)
  extensible-mcp add-server --name N --url U (--token-stdin | --token T) [--config FILE]
  extensible-mcp pins list | diff <server> [tool] | accept <server> (<tool> | --all) | reject <server> [tool]
                                       Review tool definitions held for the operator
                                       (see extensible-mcp pins --help)

Serves three meta-tools (search_tools, call_tool, load_mcp_server) over stdio (default) or
Streamable HTTP at /mcp, in front of the MCP servers named in the config file.

Options:
  --config FILE        Config file (JSON: {"mcpServers": {...}, "filters": {...}}); a .yaml/.yml
                       file runs transparent mode instead (see mcp-elicitation-proxy --help). Without it:
                       $EXTENSIBLE_MCP_CONFIG, ~/Library/Application Support/extensible-mcp/config.json
                       (macOS), ~/.config/extensible-mcp/config.json, ./config.json.
  --http               Serve Streamable HTTP instead of stdio.
  --port N             HTTP port (default 3333).
  --host H             HTTP bind address (default 127.0.0.1). Host and Origin headers are checked.
  --allowed-host H:P   Also accept this Host header (repeatable), e.g. behind a reverse proxy.
  --http-tokens FILE   Inbound clients' bearer tokens for --http (name=token lines, # comments; each
                       token 16+ characters). A client must present one; its name is the client's
                       principal, which owns its discovery scopes. Without this file there is no
                       authentication: every HTTP client is the principal "anonymous".
  --max-sessions N     HTTP sessions (2025-11-25 clients) open at once, also per client address
                       (default 100 in all, 25 per address); a new one closes the least recently used
                       idle session, or is refused while every session is busy.
  --store URL          Where discovery scopes, tool pins and spent request states are kept:
                       sqlite:FILE (shared by proxies on one file), postgres://… (shared by
                       replicas on one database) or memory: (pins then last for the process only).
                       Default: sqlite:proxy.sqlite beside the config. Also $EXTENSIBLE_MCP_STORE,
                       which keeps a password out of the process list.
  --state-key FILE     The request states' HMAC key (32 random bytes, made if missing), outside the
                       store; every replica gets the same file. Default for sqlite: FILE.key;
                       required for postgres://.
  --call-timeout MS    Abandon a downstream call after MS milliseconds (default 60000).
  --allow-localhost-loads  Let load_mcp_server reach http://localhost and loopback addresses (as
                       "load_control": {"allow_localhost": true} does); off by default. Read at start.
  --offline            Never download the embedding model; use the staged one or lexical search.
  -h, --help           Show this help.

add-server (add a Streamable HTTP server with a bearer token, without restarting the proxy):
  --name N             Server name (letters, digits, "_", "-", "."; no "__"). An existing name is
                       refused: add-server never re-points a server.
  --url U              Its Streamable HTTP endpoint. The token is only ever sent to exactly this URL.
  --token-stdin        Read the token from standard input (preferred).
  --token T            The token as an argument (visible to other local users in the process list).
  --config FILE        As above.
  It first connects with the token and lists the tools (redirects are never followed; a redirect
  is reported with its target), and only then writes the token to the tokens file (mode 0600,
  atomic, other lines kept) and the server to the config. Then it sends SIGHUP to the proxy
  running on that config (found through its pid file, FILE.pid), which connects and indexes the
  new server in place. Exit codes: 0 added, 1 verification failed (nothing written), 2 bad usage
  or config.

Credentials: Streamable HTTP servers get "Authorization: Bearer <token>" from the tokens file
(name=value lines, # comments, quotes stripped), read fresh on every request, and only when the
URL is exactly the one configured for that name. A running proxy holds FILE.pid beside its
config; a second proxy on the same config is refused.

Reload: SIGHUP makes it re-read the config and apply all of it in place: new servers are
connected, servers whose command, args, env or URL changed are re-pointed (calls in flight
finish on the old connection), removed servers are dropped, and the filters are rebuilt for the
next request. A config that no longer loads keeps the running one; the log says why.

Tool pinning: the first listing of each server is pinned in the store (every definition, hashed).
A later definition that differs, or a tool name new to that server, is held: not searchable, not
callable, named in the log, until the operator accepts it with extensible-mcp pins accept. A
"pins" file in the config fixes hashes ahead of first use. SIGHUP also re-checks every connected
server's last listing against the store.

Server requests: downstreams are shared, so the proxy declares form elicitation, sampling and
roots to them. A downstream's request made during a call_tool goes to that call's session; one
made outside any call (or while calls from several sessions are in flight to it) is refused and
logged (roots/list: an empty list). A form asking for a secret is declined and never shown.
A server loaded at runtime (load_mcp_server) is declared none of these: it can ask nobody.

Environment:
  EXTENSIBLE_MCP_CONFIG     Config file when --config is not given.
  EXTENSIBLE_MCP_MODEL_DIR  Folder with Xenova/all-MiniLM-L6-v2 (default: the package's .models).
  EXTENSIBLE_MCP_OFFLINE=1  Same as --offline.
  EXTENSIBLE_MCP_TOKENS_FILE  Tokens file (default: "tokens" beside the config). Relative to the
                            config's folder, "~" expanded; if set, it must exist.

Stopping: one SIGINT or SIGTERM (or the client closing stdin) stops it in order: a new request is
refused, the calls in flight get up to 5 s to finish and be answered, servers are closed, exit 0;
a shutdown that takes over 10 s exits 1. Over stdio a message over 4 MiB is answered with a
JSON-RPC error and the session goes on.

Exit codes: 0 normal stop, 1 runtime failure, 2 bad usage or config.`;

function parseCliArgs(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string' },
      http: { type: 'boolean', default: false },
      port: { type: 'string', default: '3333' },
      host: { type: 'string', default: '127.0.0.1' },
      'allowed-host': { type: 'string', multiple: true },
      'http-tokens': { type: 'string' },
      'max-sessions': { type: 'string' },
      store: { type: 'string' },
      'state-key': { type: 'string' },
      'call-timeout': { type: 'string', default: '60000' },
      'allow-localhost-loads': { type: 'boolean', default: false },
      offline: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
}

function usageError(message: string): number {
  process.stderr.write(`extensible-mcp: ${message}\nRun extensible-mcp --help for usage.\n`);
  return 2;
}

function positiveInteger(value: string, flag: string): number | undefined {
  const number = Number(value);
  return Number.isInteger(number) && number >= 0 && number <= 2_147_483_647
    ? number
    : void usageError(`${flag} expects a whole number, got "${value}"`);
}

/** How long an orderly shutdown may take before the process gives up on it (exit 1). */
const shutdownTimeoutMs = 10_000;
/** How long the process may linger after shutdown finished before it is ended anyway. */
const exitGraceMs = 5_000;

/**
 * Resolves with the exit code once the proxy has stopped: on the first SIGINT or SIGTERM, or
 * when `ended` settles (stdin ended). One signal is enough: the handlers stay installed during
 * the shutdown, so a second signal changes nothing. The shutdown is bounded: if `stop` has not
 * finished within {@link shutdownTimeoutMs} the code is 1, and if anything (a downstream child's
 * pipe, a worker, a timer) still holds the event loop {@link exitGraceMs} after it, the process
 * exits anyway.
 */
function waitForShutdown(stop: () => Promise<void>, ended?: Promise<void>): Promise<number> {
  return new Promise((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => begin(signal);
    const begin = (reason: string) => {
      if (stopping) return;
      stopping = true;
      logLine(`${reason}: shutting down`);
      let deadline: NodeJS.Timeout | undefined;
      const timedOut = new Promise<number>((settle) => {
        deadline = setTimeout(() => {
          logLine(`shutdown did not finish within ${shutdownTimeoutMs / 1000} s; exiting`);
          settle(1);
        }, shutdownTimeoutMs);
      });
      const finished = stop().then(
        () => 0,
        (error: unknown) => {
          logLine(`shutdown failed: ${error instanceof Error ? error.message : String(error)}`);
          return 1;
        },
      );
      void Promise.race([finished, timedOut]).then((code) => {
        clearTimeout(deadline);
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        // Unreferenced: it fires only if something else still keeps the process alive.
        setTimeout(() => process.exit(code), exitGraceMs).unref();
        resolve(code);
      });
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    void ended?.then(() => begin('stdin closed'));
  });
}

/** Compiles `filters.rego_policy` into its call filter (at start and on every reload). */
function compileRego(regoPath: string) {
  return regoPolicyFilter({
    regoPath,
    onError: (error) => process.stderr.write(`[extensible-mcp] rego_policy: ${String(error)}\n`),
  });
}

function logLine(line: string): void {
  process.stderr.write(`[extensible-mcp] ${line}\n`);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** A `--config` naming a YAML file selects transparent mode (SPEC §3.10). */
function transparentConfigFlag(argv: readonly string[]): boolean {
  return argv.some((arg, position) => {
    const value = arg.startsWith('--config=')
      ? arg.slice('--config='.length)
      : argv[position - 1] === '--config'
        ? arg
        : '';
    return /\.ya?ml$/i.test(value);
  });
}

/** The `extensible-mcp` command. Resolves with the process exit code when it stops. */
export async function runCli(argv: string[]): Promise<number> {
  if (argv[0] === 'add-server') {
    return runAddServer({
      argv: argv.slice(1),
      env: readProxyEnv(),
      io: {
        readStdin,
        out: (line) => process.stdout.write(`${line}\n`),
        err: (line) => process.stderr.write(`${line}\n`),
      },
    });
  }
  if (argv[0] === 'pins') {
    return runPins({
      argv: argv.slice(1),
      env: readProxyEnv(),
      io: { out: (line) => process.stdout.write(`${line}\n`), err: (line) => process.stderr.write(`${line}\n`) },
    });
  }
  if (transparentConfigFlag(argv)) return runTransparentCli(argv);
  let parsed: ReturnType<typeof parseCliArgs>;
  try {
    parsed = parseCliArgs(argv);
  } catch (error) {
    return usageError(error instanceof Error ? error.message : String(error));
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${help}\n`);
    return 0;
  }
  if (positionals.length > 0) return usageError(`unexpected argument "${positionals[0]}"`);
  const port = positiveInteger(values.port, '--port');
  const callTimeoutMs = positiveInteger(values['call-timeout'], '--call-timeout');
  const maxSessions =
    values['max-sessions'] === undefined ? undefined : positiveInteger(values['max-sessions'], '--max-sessions');
  if (port === undefined || callTimeoutMs === undefined) return 2;
  if (values['max-sessions'] !== undefined && (maxSessions === undefined || maxSessions < 1)) {
    return usageError('--max-sessions expects a whole number from 1');
  }

  const env = readProxyEnv();
  let gatewayOptions: GatewayOptions;
  let configPath: string;
  let running: Gateway;
  let stores: ProxyStores | undefined;
  let inboundTokens: readonly InboundToken[] | undefined;
  try {
    const path = resolveConfigPath({
      ...(values.config !== undefined && { flag: values.config }),
      ...(env.configPath !== undefined && { env: env.configPath }),
    });
    configPath = path;
    const config = loadConfig(path, env.variables);
    process.stderr.write(`[extensible-mcp] config: ${path}\n`);
    const tokens = resolveTokensPath({
      configPath: path,
      ...(env.tokensFile !== undefined && { override: env.tokensFile }),
    });
    // The path only: token values are never logged.
    logLine(`tokens: ${tokens.path}${tokens.explicit ? ' (EXTENSIBLE_MCP_TOKENS_FILE)' : ''}`);
    gatewayOptions = {
      ...gatewayOptionsFromConfig(config),
      ...(values['allow-localhost-loads'] && { allowLocalhostLoads: true }),
      callTimeoutMs,
      embeddings: {
        modelDir: env.modelDir,
        allowRemote: !(values.offline || env.offline),
        model: config.search.model,
        // The vector cache lives in the data folder when one is set, else beside the config.
        ...(config.search.vector_cache && { cacheDir: env.dataDir ?? dirname(path) }),
      },
      credentials: createTokenCredentials({ tokensPath: tokens.path, log: logLine }),
    };
    if (values['http-tokens'] !== undefined) {
      if (!values.http) return usageError('--http-tokens needs --http');
      inboundTokens = readInboundTokens(values['http-tokens']);
      logLine(`inbound tokens: ${values['http-tokens']} (${inboundTokens.length} clients)`);
    }
    const store = parseStoreUrl(values.store ?? env.store, path);
    stores = await openProxyStores(store, values['state-key']);
    logLine(`store: ${describeStore(store)}`);
    if (store.kind === 'memory') {
      logLine('pins: memory: tool pins live for this process only; every start trusts the first listings again');
    }
    if (config.pins !== undefined) {
      const seeded = await seedPins(stores.pinStore, readPinsFile(config.pins));
      logLine(
        `pins file: ${config.pins} (${seeded.seeded.length} servers fixed ahead of first use${seeded.known.length ? `; already pinned in the store, kept: ${seeded.known.join(', ')}` : ''})`,
      );
    }
    gatewayOptions = { ...gatewayOptions, discoveryStore: stores.discoveryStore, pinStore: stores.pinStore };
    const regoPath = config.filters.rego_policy;
    if (regoPath !== undefined) gatewayOptions = { ...gatewayOptions, regoPolicy: await compileRego(regoPath) };
    // Filters compile here, inside config handling: a bad pattern is a config error (exit 2),
    // never a crash after the pid file exists.
    running = createGateway(gatewayOptions);
  } catch (error) {
    await stores?.close();
    if (ProxyError.isInstance(error)) return usageError(error.message);
    throw error;
  }
  const { rounds, pinStore } = stores;
  let unwatchPins: (() => void) | undefined;
  const closeStores = async () => {
    unwatchPins?.();
    await stores?.close();
  };

  // SIGHUP (from add-server) re-reads the config and connects new servers in place. The handler
  // is installed before the pid file exists, in the same tick, so a signal sent by add-server can
  // never find the proxy without a handler (SIGHUP's default action would kill it). Reloads run
  // one at a time, after start.
  let gateway: Gateway | undefined;
  let reloading: Promise<unknown> = Promise.resolve();
  const onHangup = () => {
    logLine('SIGHUP: re-reading the config');
    reloading = reloading.then(
      () =>
        gateway &&
        reloadServers({ gateway, configPath, environment: env.variables, log: logLine, compileRego }).catch(
          (error: unknown) => logLine(`reload failed: ${String(error)}`),
        ),
    );
  };
  process.on('SIGHUP', onHangup);
  let pidFile: HeldPidFile;
  try {
    pidFile = acquirePidFile(configPath);
  } catch (error) {
    process.off('SIGHUP', onHangup);
    await running.close();
    await closeStores();
    if (ProxyError.isInstance(error)) return usageError(error.message);
    throw error;
  }
  gateway = running;
  // On a store replicas share, an operator's decision recorded through any of them (`pins accept`
  // signals only the proxy whose pid file it finds) is checked here too, in the reloads' turn.
  unwatchPins = pinStore.watch?.((why) => {
    reloading = reloading.then(() =>
      running.readmitPins().then(
        () => why === 'decision' && logLine("pins: a decision in the store; re-checked the servers' last listings"),
        (error: unknown) => logLine(`pins: re-checking the listings failed: ${String(error)}`),
      ),
    );
  });
  const release = () => {
    process.off('SIGHUP', onHangup);
    pidFile.release();
  };
  // Serve at once while the configured servers connect (SPEC §3.2): one downstream that never
  // initialises must not stall the proxy's own initialize. Reloads wait for the start.
  const started = running.start();
  reloading = started;
  if (values.http) {
    const endpoint = await serveHttp(running, {
      host: values.host,
      port,
      allowedHosts: values['allowed-host'] ?? [],
      ...(inboundTokens !== undefined && { inboundTokens }),
      rounds,
      ...(maxSessions !== undefined && { maxSessions, maxSessionsPerAddress: maxSessions }),
    });
    process.stderr.write(`[extensible-mcp] serving Streamable HTTP at ${endpoint.url}\n`);
    if (inboundTokens === undefined) logLine('no --http-tokens: every HTTP client is the principal "anonymous"');
    return waitForShutdown(async () => {
      release();
      await endpoint.drain(shutdownDrainMs);
      await endpoint.close();
      await running.close();
      await closeStores();
    });
  }
  // The proxy's own stdio transport: an oversized or malformed line is answered with a JSON-RPC
  // error instead of closing the session; end of stdin closes it.
  const transport = new StdioTransport();
  // On stdio the client is whoever runs the proxy: the local user (SPEC §3.5). The opening
  // exchange picks the era (a 2025 `initialize`, or a 2026 request), served by one instance.
  const principal = { id: `user:${userInfo().username}` };
  serveStdio(
    ({ era }) => {
      const server = createSearchModeServer(running, { principal, era, rounds });
      server.onerror = (error) => logLine(error.message);
      return server;
    },
    { transport, onerror: (error) => logLine(error.message) },
  );
  return waitForShutdown(async () => {
    // No new request is taken once shutdown begins (a call arriving now would reconnect, respawn,
    // the downstreams being closed); the calls already read finish and are answered first.
    await transport.drain(shutdownDrainMs);
    await transport.close();
    release();
    await running.close();
    await closeStores();
  }, transport.ended);
}
