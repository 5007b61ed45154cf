import type { Readable, Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { ProxyError } from '../errors';
import { createTransparentProxy } from '../transparent/create-transparent-proxy';
import { describeUpstream } from '../transparent/create-upstream-transport';
import { loadTransparentConfig } from '../transparent/load-transparent-config';
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

const HELP = `Usage: mcp-elicitation-proxy --config FILE
       extensible-mcp --config FILE.yaml

Serves one upstream MCP server over stdio with its own tools/list unchanged, and asks the
user (MCP form elicitation) for missing required arguments before forwarding a tools/call.
Secret-looking required fields are never asked for through a form.

Options:
  -c, --config FILE   The YAML configuration (mcp-elicitation-proxy format).
                      Default: $MCP_ELICITATION_PROXY_CONFIG.
  -h, --help          Show this help.

Exit codes: 0 shut down cleanly, 1 upstream unreachable or closed, 2 bad usage or configuration.
Logs go to stderr; stdout carries the MCP protocol.
`;

/**
 * The `mcp-elicitation-proxy` command (SPEC §3.10, §3.11): parses `--config`/`--help`, loads
 * and validates the YAML, connects the upstream and serves stdio until the client or the
 * upstream goes away. Returns the process exit code; the composition root for this mode.
 */
export async function runTransparentCli(argv: readonly string[], io: TransparentCliIo = {}): Promise<number> {
  const stdin = io.stdin ?? process.stdin;
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  const say = (line: string) => stderr.write(`mcp-elicitation-proxy: ${line}\n`);

  let flags: { config?: string | undefined; help?: boolean | undefined };
  try {
    flags = parseArgs({
      args: [...argv],
      options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } },
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
  const env = readTransparentEnv(io.env);
  const configPath = flags.config ?? env.configPath;
  if (configPath === undefined || configPath.trim() === '') {
    say('no configuration: pass --config FILE or set MCP_ELICITATION_PROXY_CONFIG');
    return TRANSPARENT_EXIT.usage;
  }

  let config: Awaited<ReturnType<typeof loadTransparentConfig>>;
  try {
    config = await loadTransparentConfig(configPath, env.variables);
  } catch (error) {
    if (ProxyError.isInstance(error)) {
      say(error.message);
      return TRANSPARENT_EXIT.usage;
    }
    throw error;
  }

  const proxy = createTransparentProxy({ config, log: say });
  // The SDK's stdio server transport does not notice end of input: stop when the client hangs up.
  let stopRequested = false;
  const stop = () => {
    stopRequested = true;
    void proxy.close();
  };
  stdin.once('end', stop);
  stdin.once('close', stop);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    try {
      await proxy.connect(new StdioServerTransport(stdin, stdout));
    } catch (error) {
      await proxy.close();
      if (stopRequested) return TRANSPARENT_EXIT.ok;
      say(error instanceof Error ? error.message : String(error));
      return TRANSPARENT_EXIT.failed;
    }
    say(`serving ${describeUpstream(config.upstream)} as "${config.proxy.name}" (transparent mode)`);
    const outcome = await proxy.closed;
    return outcome === 'upstream-lost' ? TRANSPARENT_EXIT.failed : TRANSPARENT_EXIT.ok;
  } finally {
    stdin.off('end', stop);
    stdin.off('close', stop);
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}
