import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { z } from 'zod';
import { DOWNSTREAM_PROTOCOLS } from './downstream/protocol-setting';
import { envReferenceResolver } from './env-references';
import { ProxyError } from './errors';
import { globProblem, urlPatternProblem } from './filters/load-control';
import { nameProblem } from './names';

const nonBlank = z.string().trim().min(1, 'expected a non-empty string');

/**
 * `protocol`: the MCP version spoken to the server (issue 31, docs/protocol.md). A pinned version
 * never falls back; `auto` (the default) asks the server and speaks 2026-07-28 when it offers it.
 */
const protocolSchema = z.enum(DOWNSTREAM_PROTOCOLS, {
  error: (issue) =>
    `expected one of ${DOWNSTREAM_PROTOCOLS.map((value) => JSON.stringify(value)).join(', ')} (the MCP protocol version to speak to this server), got ${JSON.stringify(issue.input)}`,
});

const stdioServerSchema = z.strictObject({
  command: nonBlank,
  args: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  protocol: protocolSchema.optional(),
});

const urlServerSchema = z.strictObject({
  url: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL' }),
  protocol: protocolSchema.optional(),
});

const serverSchema = z.unknown().transform((value, context) => {
  const isObject = typeof value === 'object' && value !== null && !Array.isArray(value);
  const hasCommand = isObject && 'command' in value;
  const hasUrl = isObject && 'url' in value;
  if (hasCommand === hasUrl) {
    context.addIssue({
      code: 'custom',
      message: 'expected exactly one of "command" (stdio) or "url" (Streamable HTTP)',
    });
    return z.NEVER;
  }
  const parsed = (hasCommand ? stdioServerSchema : urlServerSchema).safeParse(value);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) context.addIssue({ ...issue, code: 'custom', path: issue.path });
    return z.NEVER;
  }
  return parsed.data;
});

/**
 * A list of non-blank strings that `problem` accepts. Patterns are checked here, at the config
 * boundary, so a malformed one is a config error naming its JSON path instead of a crash when
 * the filter is built after the proxy started (issue 10).
 */
function listOf(problem?: (value: string) => string | undefined) {
  const item = problem
    ? nonBlank.superRefine((value, context) => {
        // A blank value already failed `nonBlank`: one issue per value is enough.
        const found = value === '' ? undefined : problem(value);
        if (found) context.addIssue({ code: 'custom', message: found });
      })
    : nonBlank;
  return z.array(item).default([]);
}

/** Exact names. */
const nameList = listOf();
/** Globs over names, as the filters compile them. */
const globList = listOf(globProblem);
/** `scheme://host[:port]/path` globs (SPEC §3.7). */
const urlPatternList = listOf(urlPatternProblem);

const filtersSchema = z.strictObject({
  similarity_threshold: z.number().min(0).max(1).optional(),
  access_control: z
    .strictObject({ deny: nameList, deny_patterns: globList, allow_servers: z.array(nonBlank).optional() })
    .optional(),
  load_control: z
    .strictObject({
      deny_names: nameList,
      deny_name_patterns: globList,
      deny_url_patterns: urlPatternList,
      allow_url_patterns: urlPatternList,
      /** Lets `load_mcp_server` reach `http://localhost` and loopback addresses (read at start). */
      allow_localhost: z.boolean().optional(),
    })
    .optional(),
  rego_policy: nonBlank.optional(),
  /**
   * Asks the client's user for a missing required argument before a call is forwarded (SPEC
   * §3.10, the elicitation middleware as a call filter): a form for a 2025 client, an
   * `input_required` round for a 2026 one. A secret-looking field is never asked for. Off by default.
   */
  elicit_missing: z.boolean().optional(),
  /**
   * Tools a person must approve with a passkey over the exact call (docs/human-authority.md):
   * `tool` is a glob over qualified names, `roles` who must each approve.
   */
  approval_required: z
    .array(
      z.strictObject({
        tool: nonBlank.superRefine((value, context) => {
          const found = globProblem(value);
          if (found) context.addIssue({ code: 'custom', message: found });
        }),
        roles: z.array(nonBlank).min(1, 'expected at least one role who must approve'),
      }),
    )
    .optional(),
});

/**
 * The `search` block (issue 17). `model` picks the embedding tier: `minilm` (default: fast,
 * all-MiniLM-L6-v2) or `mpnet` (the opt-in quality tier; needs `npm run model:stage-mpnet`).
 * `vector_cache` keeps tool embeddings on disk between runs (default on).
 */
const searchSchema = z.strictObject({
  model: z.enum(['minilm', 'mpnet']).default('minilm'),
  vector_cache: z.boolean().default(true),
});

const configSchema = z.strictObject({
  mcpServers: z.record(z.string(), serverSchema).superRefine((servers, context) => {
    for (const name of Object.keys(servers)) {
      const problem = nameProblem(name);
      if (problem) context.addIssue({ code: 'custom', path: [name], message: problem });
    }
  }),
  filters: filtersSchema.default({}),
  search: searchSchema.default({ model: 'minilm', vector_cache: true }),
  /** A `pins` file (relative to the config's folder) fixing tool definitions ahead of first use (docs/pinning.md). */
  pins: nonBlank.optional(),
});

/** A stdio downstream as configured. */
export type StdioServerConfig = z.infer<typeof stdioServerSchema>;
/** A Streamable HTTP downstream as configured. */
export type UrlServerConfig = z.infer<typeof urlServerSchema>;
/** One configured downstream server. */
export type ServerConfig = StdioServerConfig | UrlServerConfig;
/** The `filters` block. */
export type FiltersConfig = z.infer<typeof filtersSchema>;
/** The `search` block: which embedding tier, and whether vectors are cached on disk. */
export type SearchConfig = z.infer<typeof searchSchema>;

/** A validated search-mode config with every relative path resolved against its folder. */
export interface ProxyConfig {
  /** Absolute path of the file it came from. */
  readonly path: string;
  readonly servers: Readonly<Record<string, ServerConfig>>;
  readonly filters: FiltersConfig;
  readonly search: SearchConfig;
  /** Absolute path of the `pins` file, when the config names one (docs/pinning.md). */
  readonly pins?: string;
}

/** Where the config file is looked for when no `--config` is given (SPEC §3.1), in order. */
export function defaultConfigPaths(
  options: { home?: string; platform?: NodeJS.Platform; cwd?: string } = {},
): string[] {
  const home = options.home ?? homedir();
  const paths: string[] = [];
  if ((options.platform ?? process.platform) === 'darwin') {
    paths.push(join(home, 'Library', 'Application Support', 'extensible-mcp', 'config.json'));
  }
  paths.push(join(home, '.config', 'extensible-mcp', 'config.json'), resolve(options.cwd ?? '.', 'config.json'));
  return paths;
}

/**
 * Picks the config file: the explicit flag, then `EXTENSIBLE_MCP_CONFIG`, then the first default
 * location that exists. An explicit path that does not exist is an error, never a silent fallback.
 */
export function resolveConfigPath(options: { flag?: string; env?: string; candidates?: string[] }): string {
  const explicit = options.flag ?? options.env;
  if (explicit !== undefined) {
    const path = resolve(explicit);
    if (!existsSync(path)) {
      const source = options.flag !== undefined ? '--config' : 'EXTENSIBLE_MCP_CONFIG';
      throw new ProxyError('config-not-found', `${path}: config file not found (given by ${source}).`);
    }
    return path;
  }
  const found = (options.candidates ?? defaultConfigPaths()).find((path) => existsSync(path));
  if (!found) {
    throw new ProxyError(
      'config-not-found',
      `No config file found. Pass --config, set EXTENSIBLE_MCP_CONFIG, or create one of: ${(options.candidates ?? defaultConfigPaths()).join(', ')}.`,
    );
  }
  return found;
}

/** Renders a zod issue path as a JSON path (`mcpServers.github.url`). */
function jsonPath(path: readonly PropertyKey[]): string {
  return path.length === 0 ? '(root)' : path.map(String).join('.');
}

/**
 * Reads and validates a search-mode config. Errors name the file, the JSON path and what was
 * expected. Stdio `env` values that are exactly `$NAME` resolve from a `.env` beside the config
 * first, then from `environment`.
 */
export function loadConfig(path: string, environment: Readonly<Record<string, string | undefined>> = {}): ProxyConfig {
  const absolute = resolve(path);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(absolute, 'utf8'));
  } catch (error) {
    const reason = error instanceof SyntaxError ? `invalid JSON (${error.message})` : 'cannot be read';
    throw new ProxyError('config-invalid', `${absolute}: ${reason}.`, { cause: error });
  }
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${jsonPath(issue.path)}: ${issue.message}`);
    throw new ProxyError('config-invalid', `${absolute}: invalid config:\n${lines.join('\n')}`);
  }
  const folder = dirname(absolute);
  const resolveEnv = envReferenceResolver(absolute, environment);
  const servers: Record<string, ServerConfig> = {};
  for (const [name, server] of Object.entries(parsed.data.mcpServers)) {
    servers[name] =
      'command' in server && server.env ? { ...server, env: resolveEnv(server.env, `mcpServers.${name}.env`) } : server;
  }
  const { rego_policy, ...filters } = parsed.data.filters;
  return {
    path: absolute,
    servers,
    filters: rego_policy === undefined ? filters : { ...filters, rego_policy: resolve(folder, rego_policy) },
    search: parsed.data.search,
    ...(parsed.data.pins !== undefined && { pins: resolve(folder, parsed.data.pins) }),
  };
}
