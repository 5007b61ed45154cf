import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, describe, expect, it } from 'vitest';
import { callTool, searchNames, textOf } from './helpers';
import { connectHttpClient } from './http-client';

const bin = 'bin/extensible-mcp.mjs';
const offline = {
  ...process.env,
  EXTENSIBLE_MCP_OFFLINE: '1',
  EXTENSIBLE_MCP_MODEL_DIR: join(tmpdir(), 'no-model-here'),
};

function run(args: string[]) {
  return spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env: offline, timeout: 60_000 });
}

function writeConfig(config: unknown): string {
  const path = join(mkdtempSync(join(tmpdir(), 'emcp-cli-')), 'config.json');
  writeFileSync(path, JSON.stringify(config));
  return path;
}

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

/** What each client's proxy wrote to stderr, for the message of an assertion that fails. */
const stderrOf = new WeakMap<Client, () => string>();

/**
 * Starts `node <args>` (offline) as an MCP server over stdio, connects a real client to it, and
 * resolves once the proxy logged the end of its start (`connected N of M servers`). A search
 * waits only a grace of 10 s for servers still connecting, and a loaded machine can take longer
 * than that to spawn one: the tests here are about the CLI, not that grace.
 */
async function connectStdio(client: Client, args: string[], options: { cwd?: string } = {}): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args,
    ...options,
    env: offline as Record<string, string>,
    stderr: 'pipe',
  });
  let written = '';
  const started = new Promise<void>((resolve) => {
    transport.stderr?.on('data', (chunk: Buffer) => {
      written += chunk.toString('utf8');
      if (/connected \d+ of \d+ servers/.test(written)) resolve();
    });
  });
  await client.connect(transport);
  stderrOf.set(client, () => written);
  cleanups.push(() => client.close());
  await started;
  return client;
}

describe('extensible-mcp CLI', () => {
  it('--help documents every flag', () => {
    const result = run(['--help']);
    expect(result.status).toBe(0);
    for (const flag of [
      '--config',
      '--http',
      '--port',
      '--host',
      '--allowed-host',
      '--http-tokens',
      '--max-sessions',
      '--store',
      '--state-key',
      '--call-timeout',
      '--offline',
      '--help',
    ]) {
      expect(result.stdout).toContain(flag);
    }
  });

  it.each([
    [
      'a missing explicit config file',
      ['--config', '/nonexistent/config.json'],
      /\/nonexistent\/config\.json: config file not found/,
    ],
    [
      'both command and url',
      ['--config', writeConfig({ mcpServers: { x: { command: 'a', url: 'https://x.example' } } })],
      /mcpServers\.x: expected exactly one of "command" \(stdio\) or "url"/,
    ],
    [
      'an unknown key',
      ['--config', writeConfig({ mcpServers: {}, extra: true })],
      /\(root\): Unrecognized key: "extra"/,
    ],
    ['an unknown flag', ['--frobnicate'], /Unknown option '--frobnicate'/],
    [
      'a PostgreSQL store without the shared state key',
      ['--config', writeConfig({ mcpServers: {} }), '--store', 'postgres://proxy:hunter2@127.0.0.1:1/emcp'],
      /--store postgres:\/\/… needs --state-key FILE/,
    ],
    [
      'a PostgreSQL store that cannot be reached',
      [
        '--config',
        writeConfig({ mcpServers: {} }),
        '--store',
        `postgres://proxy:hunter2@localhost/emcp?host=${encodeURIComponent(mkdtempSync(join(tmpdir(), 'emcp-no-pg-')))}`,
        '--state-key',
        join(mkdtempSync(join(tmpdir(), 'emcp-key-')), 'state.key'),
      ],
      /cannot open the store on PostgreSQL: /,
    ],
  ])('exits 2 on %s and says what is wrong', (_name, args, message) => {
    const result = run(args);
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(message);
    // A store URL's password is never echoed.
    expect(result.stderr).not.toContain('hunter2');
  });

  it('serves a real client over stdio: list, search, call', async () => {
    const client = await connectStdio(new Client({ name: 'cli-smoke', version: '1.0.0' }), [
      bin,
      '--config',
      'examples/everything.json',
    ]);
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual([
      'search_tools',
      'call_tool',
      'load_mcp_server',
    ]);
    expect(await searchNames(client, 'echo back a message')).toContain('everything__echo');
    expect(textOf(await callTool(client, 'everything__echo', { message: 'cli' }))).toBe('Echo: cli');
    // The example config hides the trigger-* tools.
    expect(await searchNames(client, 'trigger a sampling request', 50)).not.toContain(
      'everything__trigger-sampling-request',
    );
  });

  it('serves a 2026-07-28 client over stdio: the search returns a handle that opens the call, and nothing else does', async () => {
    const client = await connectStdio(
      new Client({ name: 'sessionless', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } }),
      [bin, '--config', 'examples/everything.json'],
    );
    expect(client.getProtocolEra()).toBe('modern');
    const echo = { tool_name: 'everything__echo', arguments: { message: 'modern' } };
    // No search yet, so nothing is callable: a sessionless client has no connection to remember it by.
    expect(textOf(await client.callTool({ name: 'call_tool', arguments: echo }))).toMatch(/not discovered|search/i);
    const found = await client.callTool({ name: 'search_tools', arguments: { query: 'echo back a message' } });
    const handle = (found.structuredContent as { handle?: string }).handle;
    expect(handle).toMatch(/^dh_/);
    expect(textOf(await client.callTool({ name: 'call_tool', arguments: { ...echo, handle } }))).toBe('Echo: modern');
    // The same call without the handle is refused: the handle is the discovery scope.
    expect((await client.callTool({ name: 'call_tool', arguments: echo })).isError).toBe(true);
  });

  it("runs as the README's Claude Desktop entry says: by absolute path, from another working directory", async () => {
    const snippet = /### Claude Desktop\s+```json\n([\s\S]*?)\n```/.exec(readFileSync('README.md', 'utf8'))?.[1];
    const entry = (JSON.parse(snippet ?? '{}') as { mcpServers: Record<string, { command: string; args: string[] }> })
      .mcpServers['extensible-mcp'];
    expect(entry?.command).toBe('node');
    const config = writeConfig({
      mcpServers: {
        everything: {
          command: process.execPath,
          args: [resolve('node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'],
        },
      },
    });
    const args = (entry?.args ?? []).map((arg) =>
      arg.replace('/absolute/path/to/extensible-mcp', process.cwd()).replace('/absolute/path/to/config.json', config),
    );
    const client = await connectStdio(new Client({ name: 'claude-desktop-entry', version: '1.0.0' }), args, {
      cwd: mkdtempSync(join(tmpdir(), 'emcp-desktop-')),
    });
    expect(await searchNames(client, 'echo back a message'), stderrOf.get(client)?.()).toContain('everything__echo');
    expect(textOf(await callTool(client, 'everything__echo', { message: 'desktop' }))).toBe('Echo: desktop');
  });

  it('serves Streamable HTTP with --http on the loopback interface', async () => {
    const child = spawn(process.execPath, [bin, '--config', 'examples/everything.json', '--http', '--port', '0'], {
      env: offline,
    });
    cleanups.push(
      () =>
        new Promise((resolve) => {
          child.once('exit', resolve);
          child.kill('SIGTERM');
        }),
    );
    // The address, once the servers connected (as connectStdio waits, and for the same reason).
    let seen = '';
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        const match = /serving Streamable HTTP at (\S+)/.exec(seen);
        if (match?.[1] && /connected \d+ of \d+ servers/.test(seen)) resolve(match[1]);
      });
      child.once('exit', () => reject(new Error(`exited early: ${seen}`)));
    });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const client = await connectHttpClient(url);
    cleanups.unshift(() => client.close());
    expect(await searchNames(client, 'echo back a message'), seen).toContain('everything__echo');
    expect(textOf(await callTool(client, 'everything__echo', { message: 'http' }))).toBe('Echo: http');
  });

  it('enforces a configured rego_policy on calls', async () => {
    const config = writeConfig({
      mcpServers: {
        fixture: {
          command: process.execPath,
          args: ['--import', 'tsx', `${process.cwd()}/tests/fixtures/stdio-fixture-server.ts`],
        },
      },
      filters: { rego_policy: `${process.cwd()}/examples/deny_dangerous.rego` },
    });
    const client = await connectStdio(new Client({ name: 'cli-rego', version: '1.0.0' }), [bin, '--config', config]);
    expect(await searchNames(client, 'echoes back the message')).toContain('fixture__echo');
    expect(textOf(await callTool(client, 'fixture__echo', { message: 'hello' }))).toBe('echo: hello');
    const refused = await callTool(client, 'fixture__echo', { message: 'sure: rm -rf / --no-preserve-root' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/destructive shell or SQL command/);
  });

  it('runs transparent mode for a YAML config and exits 2 when it is invalid', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'emcp-yaml-')), 'bad.yaml');
    writeFileSync(path, 'upstream:\n  url: https://x.example/mcp\n  command: also-this\n');
    const result = run(['--config', path]);
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(
      /mcp-elicitation-proxy: Invalid configuration:\n.*bad\.yaml: upstream: set exactly one of upstream\.url/,
    );
  });

  it('says once that search is lexical-only when no model is available', () => {
    const transport = spawnSync(process.execPath, [bin, '--config', writeConfig({ mcpServers: {} })], {
      encoding: 'utf8',
      env: offline,
      input: '',
      timeout: 60_000,
    });
    expect(transport.status).toBe(0);
    expect(transport.stderr.match(/tool search is lexical-only/g)).toHaveLength(1);
  });
});
