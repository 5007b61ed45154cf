import { readFileSync, statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { z } from 'zod';
import { loadConfig, resolveConfigPath } from '../config';
import { isSendableToken } from '../credentials/credential-rejected';
import { credentialedFetch, type PresentedCredential, redactCredential } from '../credentials/credentialed-fetch';
import { sameServerUrl } from '../credentials/same-server-url';
import { resolveTokensPath, writeFileAtomic, writeToken } from '../credentials/tokens-file';
import { fetchWithoutRedirects } from '../downstream/downstream';
import { unwrapProbeFailure } from '../downstream/protocol-setting';
import { ProxyError } from '../errors';
import { nameProblem } from '../names';
import { signalRunningProxy } from '../pid-file';
import type { ProxyEnv } from './env';

/** The outcome of {@link verifyServer}. */
export type Verification =
  | { readonly verified: true; readonly tools: readonly string[] }
  | { readonly verified: false; readonly reason: string };

/**
 * Connects to `url` with `token` and lists its tools (SPEC §3.9 step one). The token goes only
 * to `url` itself; redirects are never followed and are reported with their target. The reason
 * of a failure never contains the token, even if the server echoes it. It negotiates the protocol
 * version as the proxy will for the server it writes (`auto`, issue 31), so a 2026-07-28-only
 * server passes the check too.
 */
export async function verifyServer(options: { url: string; token: string; timeoutMs: number }): Promise<Verification> {
  const credential: PresentedCredential = {
    headers: { Authorization: `Bearer ${options.token}` },
    unchangedSince: 0,
  };
  const client = new Client(
    { name: 'extensible-mcp-add-server', version: '0.1.0' },
    { versionNegotiation: { mode: 'auto' } },
  );
  const transport = new StreamableHTTPClientTransport(new URL(options.url), {
    fetch: credentialedFetch({
      fetch: fetchWithoutRedirects,
      credential: (url) => (sameServerUrl(options.url, url) ? credential : undefined),
      onRejected: (status) => new ProxyError('credential-rejected', `the server rejected the token (HTTP ${status})`),
    }),
  });
  try {
    await client.connect(transport, { timeout: options.timeoutMs });
    const tools: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: options.timeoutMs });
      tools.push(...page.tools.map((tool) => tool.name));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return { verified: true, tools };
  } catch (raw) {
    // A refusal by our own fetch (a redirect, the token) arrives wrapped in the probe's failure.
    const error = unwrapProbeFailure(raw);
    const text = error instanceof Error ? error.message : String(error);
    return { verified: false, reason: redactCredential(text, credential) };
  } finally {
    await client.close().catch(() => undefined);
  }
}

/**
 * Adds `{name: {url}}` to the config's `mcpServers`, keeping the rest of the document and its
 * indentation, atomically and with the file's mode. Refuses a name that is already there.
 */
export function addServerToConfig(options: { configPath: string; name: string; url: string }): void {
  const text = readFileSync(options.configPath, 'utf8');
  const document = JSON.parse(text) as { mcpServers: Record<string, unknown> };
  if (Object.hasOwn(document.mcpServers, options.name)) {
    throw new ProxyError('config-invalid', `${options.configPath}: mcpServers.${options.name} already exists.`);
  }
  document.mcpServers[options.name] = { url: options.url };
  const indent = /^\{\r?\n([ \t]+)"/.exec(text)?.[1] ?? '  ';
  writeFileAtomic(options.configPath, `${JSON.stringify(document, null, indent)}\n`, {
    mode: statSync(options.configPath).mode & 0o777,
  });
}

/** How `add-server` talks to its caller. */
export interface AddServerIo {
  /** The whole of standard input (for `--token-stdin`). */
  readStdin(): Promise<string>;
  /** Progress and results (stdout). */
  out(line: string): void;
  /** Errors (stderr). */
  err(line: string): void;
}

/** Options of {@link runAddServer}. */
export interface RunAddServerOptions {
  /** Arguments after `add-server`. */
  readonly argv: readonly string[];
  readonly env: ProxyEnv;
  readonly io: AddServerIo;
  /** Connect and list timeout for the verification; default 30 s. */
  readonly timeoutMs?: number;
}

const urlSchema = z.url({ protocol: /^https?$/ });

function parseAddServerArgs(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: false,
    options: {
      name: { type: 'string' },
      url: { type: 'string' },
      token: { type: 'string' },
      'token-stdin': { type: 'boolean', default: false },
      config: { type: 'string' },
    },
  });
}

/**
 * `extensible-mcp add-server --name N --url U (--token-stdin | --token T) [--config C]`
 * (SPEC §3.9), in order: validate the arguments; refuse a name the config already has (never
 * re-point); verify the server with the token; only then write the token (0600, atomic) and the
 * config entry; then SIGHUP a running proxy for this config, if its pid file verifiably names
 * one. Exit codes: 0 added, 1 verification failed (nothing written), 2 usage or config error.
 * The token is never printed.
 */
export async function runAddServer(options: RunAddServerOptions): Promise<number> {
  const { io } = options;
  const usage = (message: string) => {
    io.err(`extensible-mcp add-server: ${message}\nRun extensible-mcp --help for usage.`);
    return 2;
  };
  let values: ReturnType<typeof parseAddServerArgs>['values'];
  try {
    values = parseAddServerArgs(options.argv).values;
  } catch (error) {
    return usage(error instanceof Error ? error.message : String(error));
  }
  const { name, url } = values;
  if (name === undefined || url === undefined) return usage('--name and --url are required');
  const problem = nameProblem(name);
  if (problem) return usage(`invalid --name: ${problem}`);
  if (!urlSchema.safeParse(url).success) return usage(`--url must be an http(s) URL, got "${url}"`);
  if ((values.token !== undefined) === values['token-stdin']) {
    return usage('give the token with exactly one of --token-stdin or --token');
  }
  const token = (values.token ?? (await io.readStdin())).trim();
  if (token === '') return usage('the token is empty');
  if (!isSendableToken(token)) {
    return usage(
      'the token contains characters that cannot be sent in an HTTP header (for example a look-alike letter, a space or a line break); copy it again',
    );
  }

  let configPath: string;
  let tokensPath: string;
  try {
    configPath = resolveConfigPath({
      ...(values.config !== undefined && { flag: values.config }),
      ...(options.env.configPath !== undefined && { env: options.env.configPath }),
    });
    const config = loadConfig(configPath, options.env.variables);
    const existing = config.servers[name];
    if (existing) {
      const where = 'url' in existing ? existing.url : `command ${existing.command}`;
      return usage(
        `server "${name}" is already configured (${where}) in ${configPath}; refusing to re-point it. To rotate its token, edit the tokens file.`,
      );
    }
    tokensPath = resolveTokensPath({
      configPath,
      ...(options.env.tokensFile !== undefined && { override: options.env.tokensFile }),
    }).path;
  } catch (error) {
    if (ProxyError.isInstance(error)) return usage(error.message);
    throw error;
  }

  io.out(`verifying ${url} ...`);
  const verification = await verifyServer({ url, token, timeoutMs: options.timeoutMs ?? 30_000 });
  if (!verification.verified) {
    io.err(
      `extensible-mcp add-server: could not verify "${name}" at ${url}: ${verification.reason}. Nothing was written.`,
    );
    return 1;
  }
  io.out(`verified: ${verification.tools.length} tools (${verification.tools.join(', ')})`);

  try {
    // The token first: a token line without a config entry is inert (nothing is bound to it).
    writeToken({ path: tokensPath, name, value: token });
    addServerToConfig({ configPath, name, url });
  } catch (error) {
    return usage(`could not write: ${error instanceof Error ? error.message : String(error)}`);
  }
  io.out(`added "${name}" to ${configPath}; its token is in ${tokensPath}`);

  const signal = signalRunningProxy(configPath);
  io.out(
    signal.signalled
      ? `signalled the running proxy (pid ${signal.pid}); it connects "${name}" now`
      : `no running proxy signalled (pid file ${signal.reason}); "${name}" is used from the next start`,
  );
  return 0;
}
