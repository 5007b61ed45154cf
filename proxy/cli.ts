import { parseArgs } from 'node:util';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { loadConfig, resolveConfigPath } from './config';
import { createProxy } from './create-proxy';
import { readProxyEnv } from './env';
import { ProxyError } from './errors';
import { proxyOptionsFromConfig } from './from-config';
import { PolicyError, regoPolicyFilter } from './policy/index';
import { serveHttp } from './serve-http';
import { runTransparentCli } from './transparent/index';

const help = `extensible-mcp: an MCP proxy that enforces security in code, not in the model.

Usage:
  extensible-mcp [--config FILE] [--http [--port N] [--host H]] [options]
  extensible-mcp --config FILE.yaml      Transparent mode (mcp-elicitation-proxy config)

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
  --call-timeout MS    Abandon a downstream call after MS milliseconds (default 60000).
  --offline            Never download the embedding model; use the staged one or lexical search.
  -h, --help           Show this help.

Environment:
  EXTENSIBLE_MCP_CONFIG     Config file when --config is not given.
  EXTENSIBLE_MCP_MODEL_DIR  Folder with Xenova/all-MiniLM-L6-v2 (default: the package's .models).
  EXTENSIBLE_MCP_OFFLINE=1  Same as --offline.

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
      'call-timeout': { type: 'string', default: '60000' },
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

function waitForShutdown(onStop: () => Promise<void>, transportClosed?: Promise<void>): Promise<number> {
  return new Promise((resolve) => {
    const stop = () => void onStop().then(() => resolve(0));
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    void transportClosed?.then(stop);
  });
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
  if (port === undefined || callTimeoutMs === undefined) return 2;

  const env = readProxyEnv();
  let proxyOptions: ReturnType<typeof proxyOptionsFromConfig>;
  try {
    const path = resolveConfigPath({
      ...(values.config !== undefined && { flag: values.config }),
      ...(env.configPath !== undefined && { env: env.configPath }),
    });
    const config = loadConfig(path, env.variables);
    process.stderr.write(`[extensible-mcp] config: ${path}\n`);
    proxyOptions = proxyOptionsFromConfig(config);
    const regoPath = config.filters.rego_policy;
    if (regoPath !== undefined) {
      const regoPolicy = await regoPolicyFilter({
        regoPath,
        onError: (error) => process.stderr.write(`[extensible-mcp] rego_policy evaluation failed: ${String(error)}\n`),
      });
      proxyOptions = { ...proxyOptions, regoPolicy };
    }
  } catch (error) {
    if (error instanceof ProxyError || error instanceof PolicyError) return usageError(error.message);
    throw error;
  }

  const proxy = createProxy({
    ...proxyOptions,
    callTimeoutMs,
    embeddings: { modelDir: env.modelDir, allowRemote: !(values.offline || env.offline) },
  });
  await proxy.start();
  if (values.http) {
    const endpoint = await serveHttp(proxy, { host: values.host, port, allowedHosts: values['allowed-host'] ?? [] });
    process.stderr.write(`[extensible-mcp] serving Streamable HTTP at ${endpoint.url}\n`);
    return waitForShutdown(async () => {
      await endpoint.close();
      await proxy.close();
    });
  }
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = resolve;
  });
  await proxy.createServer().connect(transport);
  process.stdin.once('end', () => void transport.close());
  return waitForShutdown(() => proxy.close(), closed);
}
