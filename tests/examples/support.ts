import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Tool } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import picomatch from 'picomatch';
import { searchNames } from '../proxy/helpers';

/** The checkout's root folder. */
export const root = fileURLToPath(new URL('../..', import.meta.url));

/** The CLI entry of this checkout, by absolute path. */
export const bin = join(root, 'bin', 'extensible-mcp.mjs');

/**
 * The environment every CLI in these tests runs with: never fetch the embedding model and point
 * at a folder without one, so search is lexical and the runs are the same on every machine.
 */
export function offlineEnvironment(extra: Record<string, string> = {}): Record<string, string> {
  const environment: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) environment[key] = value;
  return {
    ...environment,
    EXTENSIBLE_MCP_OFFLINE: '1',
    EXTENSIBLE_MCP_MODEL_DIR: join(tmpdir(), 'no-model-here'),
    ...extra,
  };
}

/** A real SDK client over stdio to a process, with the process's stderr kept for assertions and diagnostics. */
export interface StdioSession {
  readonly client: Client;
  /** Everything the process wrote to stderr so far. */
  stderr(): string;
  /** Resolves once stderr matches `pattern` (already written, or when it is). */
  untilStderr(pattern: RegExp): Promise<void>;
  close(): Promise<void>;
}

/** Starts `command args` as an MCP server over stdio and connects a real SDK client to it. */
export async function connectStdio(options: {
  command: string;
  args: readonly string[];
  cwd?: string;
  env: Record<string, string>;
}): Promise<StdioSession> {
  const transport = new StdioClientTransport({
    command: options.command,
    args: [...options.args],
    env: options.env,
    stderr: 'pipe',
    ...(options.cwd !== undefined && { cwd: options.cwd }),
  });
  let stderr = '';
  const waiters = new Set<{ pattern: RegExp; resolve: () => void }>();
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
    for (const waiter of waiters) {
      if (waiter.pattern.test(stderr)) {
        waiters.delete(waiter);
        waiter.resolve();
      }
    }
  });
  const untilStderr = (pattern: RegExp) =>
    new Promise<void>((resolve) => {
      if (pattern.test(stderr)) resolve();
      else waiters.add({ pattern, resolve });
    });
  const client = new Client({ name: 'examples-test', version: '1.0.0' });
  try {
    await client.connect(transport);
  } catch (error) {
    throw new Error(`could not connect to ${options.command} ${options.args.join(' ')}:\n${stderr}`, { cause: error });
  }
  return { client, stderr: () => stderr, untilStderr, close: () => client.close() };
}

/** Lists the tools a stdio server really serves, asked directly (no proxy in between). */
export async function listServerTools(options: {
  entry: string;
  args?: readonly string[];
  cwd?: string;
  env?: Record<string, string>;
}): Promise<Tool[]> {
  const session = await connectStdio({
    command: process.execPath,
    args: [options.entry, ...(options.args ?? [])],
    env: offlineEnvironment(options.env),
    ...(options.cwd !== undefined && { cwd: options.cwd }),
  });
  try {
    return (await session.client.listTools()).tools;
  } finally {
    await session.close();
  }
}

/** The `filters.access_control.deny_patterns` of an example config, read from the committed file. */
export function denyPatterns(configPath: string): string[] {
  const config = JSON.parse(readFileSync(resolve(root, configPath), 'utf8')) as {
    filters?: { access_control?: { deny_patterns?: string[] } };
  };
  return config.filters?.access_control?.deny_patterns ?? [];
}

/**
 * Which of `names` (qualified) each pattern matches, with the options the proxy's access
 * control compiles its globs with.
 */
export function matchesByPattern(patterns: readonly string[], names: readonly string[]): Map<string, string[]> {
  return new Map(
    patterns.map((pattern) => {
      const match = picomatch(pattern, { dot: true });
      return [pattern, names.filter((name) => match(name))];
    }),
  );
}

/** What `search_tools` returns when asked with a tool's own name and description: the strongest query for it. */
export function searchByOwnWords(client: Client, tool: Tool): Promise<string[]> {
  return searchNames(client, `${tool.name} ${tool.description ?? ''}`, 50);
}
