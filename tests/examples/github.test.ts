import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Client, Tool } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectInMemory,
  createGateway,
  type Gateway,
  gatewayOptionsFromConfig,
  loadConfig,
  type ProxyEvent,
  regoPolicyFilter,
} from '../../proxy/index';
import { callTool, memoryLogger, searchNames, textOf } from '../proxy/helpers';
import {
  bin,
  connectStdio,
  denyPatterns,
  listServerTools,
  matchesByPattern,
  offlineEnvironment,
  root,
  type StdioSession,
  searchByOwnWords,
} from './support';

// examples/github/config.json, exactly as committed, in front of the pinned
// @modelcontextprotocol/server-github. Listing its tools needs no network; a call the proxy
// allows goes on to GitHub and fails here (no network, dummy token), which is expected: what
// is asserted is the proxy's decision, not GitHub's answer. A `.env` beside the config would
// take precedence over the dummy token (SPEC §3.1); the example ships only `.env.example`.
const config = 'examples/github/config.json';
const serverEntry = join(root, 'node_modules/@modelcontextprotocol/server-github/dist/index.js');
const token = { GITHUB_PERSONAL_ACCESS_TOKEN: 'github_pat_dummy_for_tests' };
const issue = { owner: 'extensible-mcp-tests', repo: 'no-such-repo', issue_number: 1 };
const refusal = "closing an issue is refused by this proxy's policy";

// Globs kept for versions of the server that do not exist yet: the pinned one has no delete
// tools (the issue's `*__delete_*`). Every other rule must hide a tool the server really lists.
const forwardLooking = new Set(['*__delete_*']);

// Ways of closing an issue the Rego example refuses; the pinned server itself accepts only
// "closed", the policy is stricter than the server on purpose.
const closingArguments: Record<string, unknown>[] = [
  { state: 'closed' },
  { state: 'CLOSED' },
  { state: ' Closed ' },
  { state: '\tclosed\n' },
  { title: 'Done', state: 'closed' },
  { state_reason: 'completed' },
];

let realTools: Tool[] = [];

beforeAll(async () => {
  realTools = await listServerTools({ entry: serverEntry, env: token });
}, 60_000);

/** The qualified names the pinned server's tools get behind the proxy. */
function qualifiedNames(): string[] {
  return realTools.map((tool) => `github__${tool.name}`);
}

function hiddenTools(): Tool[] {
  const hidden = new Set([...matchesByPattern(denyPatterns(config), qualifiedNames()).values()].flat());
  return realTools.filter((tool) => hidden.has(`github__${tool.name}`));
}

describe('examples/github through the CLI (real server-github over stdio, real SDK client)', () => {
  let cli: StdioSession;
  let client: Client;

  beforeAll(async () => {
    cli = await connectStdio({
      command: process.execPath,
      args: [bin, '--config', config, '--call-timeout', '3000'],
      cwd: root,
      env: offlineEnvironment(token),
    });
    // Searches below wait on the start's end, never on the search's 10 s grace for servers still connecting.
    await cli.untilStderr(/connected \d+ of \d+ servers/);
    client = cli.client;
  }, 60_000);

  // The proxy holds a pid file beside the config: one proxy per config at a time.
  afterAll(async () => {
    await cli?.close();
  });

  it('lists the pinned server’s tools: the rules below are about real tools', () => {
    expect(realTools.map((tool) => tool.name)).toEqual(
      expect.arrayContaining(['update_issue', 'merge_pull_request', 'push_files', 'create_repository']),
    );
  });

  it('every hiding rule matches at least one tool the pinned server really lists', () => {
    const patterns = denyPatterns(config);
    expect(patterns).toEqual(
      expect.arrayContaining(['*__merge_pull_request', '*__push_files', '*__create_repository']),
    );
    expect(patterns).toContain('*__delete_*');
    for (const [pattern, matched] of matchesByPattern(patterns, qualifiedNames())) {
      if (forwardLooking.has(pattern)) continue;
      expect(matched, `${pattern} hides nothing the server lists`).not.toEqual([]);
    }
  });

  it('search never returns a hidden tool, not even for its own description', async () => {
    expect(hiddenTools().length).toBeGreaterThanOrEqual(3);
    for (const tool of hiddenTools()) {
      const found = await searchByOwnWords(client, tool);
      expect(found.length, `nothing found for ${tool.name}: the query proves nothing`).toBeGreaterThan(0);
      expect(found).not.toContain(`github__${tool.name}`);
    }
  });

  it('control: every tool the rules leave visible is found by its own name and description', async () => {
    const hidden = new Set(hiddenTools().map((tool) => tool.name));
    for (const tool of realTools.filter((candidate) => !hidden.has(candidate.name))) {
      expect(await searchByOwnWords(client, tool)).toContain(`github__${tool.name}`);
    }
  });

  it('a hidden tool called by its exact name is refused by access control', async () => {
    for (const tool of hiddenTools()) {
      const result = await callTool(client, `github__${tool.name}`, { ...issue, pull_number: 1 });
      expect(result.isError).toBe(true);
      expect(textOf(result)).toContain(`Tool "github__${tool.name}" is not available (blocked by access control).`);
    }
  });

  it('update_issue that closes the issue is refused by the Rego example with its reason', async () => {
    expect(await searchNames(client, 'update an existing issue')).toContain('github__update_issue');
    for (const change of closingArguments) {
      const result = await callTool(client, 'github__update_issue', { ...issue, ...change });
      expect(result.isError, JSON.stringify(change)).toBe(true);
      expect(textOf(result)).toMatch(
        new RegExp(`^github__update_issue: ${refusal}; ask the user to close it on GitHub`),
      );
    }
  });

  it('update_issue that changes the title is allowed: it reaches the server, whose GitHub request fails', async () => {
    expect(await searchNames(client, 'update an existing issue')).toContain('github__update_issue');
    const result = await callTool(client, 'github__update_issue', { ...issue, title: 'A clearer title' });
    // No network and a dummy token: GitHub cannot answer. The failure must come from the server
    // (or the call timeout), not from a filter.
    expect(result.isError).toBe(true);
    const text = textOf(result);
    expect(text).not.toContain(refusal);
    expect(text).not.toContain('blocked by access control');
    expect(text).not.toContain('has not been discovered');
    expect(text).toMatch(/Server "github" failed on "update_issue"|timed out|did not answer/);
  });
});

describe('examples/github in process: the proxy’s own events for the same config file', () => {
  let gateway: Gateway;
  let inProcess: Client;
  const events: ProxyEvent[] = [];

  beforeAll(async () => {
    // The CLI's wiring of a search-mode config (proxy/cli/run-cli.ts), with an event hook.
    const loaded = loadConfig(join(root, config), token);
    const regoPath = loaded.filters.rego_policy;
    if (regoPath === undefined) throw new Error(`${config} has no rego_policy`);
    gateway = createGateway({
      ...gatewayOptionsFromConfig(loaded),
      regoPolicy: await regoPolicyFilter({ regoPath }),
      embeddings: false,
      callTimeoutMs: 3000,
      logger: memoryLogger(),
      onEvent: (event) => events.push(event),
    });
    await gateway.start();
    inProcess = await connectInMemory(gateway, { name: 'events-test', principal: { id: 'test' } });
    expect(await searchNames(inProcess, 'update an existing issue')).toContain('github__update_issue');
  }, 60_000);

  afterAll(async () => {
    await inProcess?.close();
    await gateway?.close();
  });

  /** The call-pipeline events of the next call to update_issue. */
  async function eventsOf(change: Record<string, unknown>): Promise<ProxyEvent[]> {
    const start = events.length;
    await callTool(inProcess, 'github__update_issue', { ...issue, ...change });
    return events.slice(start).filter((event) => event.pipeline === 'call' && event.tool === 'github__update_issue');
  }

  it('closing: the Rego policy denies and nothing is dispatched to the server', async () => {
    for (const change of closingArguments) {
      const seen = await eventsOf(change);
      expect(seen.find((event) => event.filter === 'regoPolicy')).toMatchObject({ decision: 'deny' });
      expect(seen.find((event) => event.filter === 'regoPolicy')?.reason).toContain(refusal);
      expect(seen.filter((event) => event.filter === 'dispatch')).toEqual([]);
    }
  });

  it('a title update: the Rego policy’s allow event, then the dispatch to the server fails on the network', async () => {
    const seen = await eventsOf({ title: 'A clearer title' });
    expect(seen.find((event) => event.filter === 'regoPolicy')).toMatchObject({ decision: 'allow' });
    expect(seen.some((event) => event.decision === 'deny')).toBe(false);
    expect(seen.find((event) => event.filter === 'dispatch')).toMatchObject({ decision: 'error' });
  });
});

// The client configs in examples/clients, as a user fills them in: each GitHub entry, launched
// from another working directory (clients start servers wherever they like; here the client
// config's own folder, still inside the checkout so npx finds the pinned server without the
// registry), serves the example with both protections.
describe('examples/clients: the GitHub entries start the example from another working directory', () => {
  const clients = {
    'Claude Desktop': {
      file: 'examples/clients/claude-desktop/claude_desktop_config.json',
      key: 'mcpServers',
      fill: (value: string) => value.replaceAll('/absolute/path/to/extensible-mcp', root.replace(/\/$/, '')),
    },
    'VS Code': {
      file: 'examples/clients/vscode/mcp.json',
      key: 'servers',
      fill: (value: string) =>
        value
          .replace(/\$\{workspaceFolder\}/g, root.replace(/\/$/, ''))
          .replace(/\$\{input:github-token\}/g, token.GITHUB_PERSONAL_ACCESS_TOKEN),
    },
  };

  it.each(Object.entries(clients))('%s', async (_client, { file, key, fill }) => {
    const entries = (
      JSON.parse(readFileSync(join(root, file), 'utf8')) as Record<
        string,
        Record<string, { command: string; args: string[]; env?: Record<string, string> }>
      >
    )[key];
    expect(Object.keys(entries ?? {})).toEqual(['github', 'files']);
    for (const entry of Object.values(entries ?? {})) {
      expect(entry.command).toBe('node');
      for (const arg of entry.args) if (arg.startsWith('/')) expect(existsSync(fill(arg)), fill(arg)).toBe(true);
    }
    const github = entries?.github;
    if (!github) throw new Error(`${file} has no github entry`);
    const environment: Record<string, string> = {};
    for (const [name, value] of Object.entries(github.env ?? {})) environment[name] = fill(value);
    const session = await connectStdio({
      command: process.execPath,
      args: github.args.map(fill),
      cwd: dirname(join(root, file)),
      env: offlineEnvironment({ ...token, ...environment }),
    });
    try {
      expect(await searchNames(session.client, 'update an existing issue')).toContain('github__update_issue');
      expect(await searchNames(session.client, 'merge a pull request', 50)).not.toContain('github__merge_pull_request');
      const closed = await callTool(session.client, 'github__update_issue', { ...issue, state: 'closed' });
      expect(textOf(closed)).toContain(refusal);
    } finally {
      await session.close();
    }
  });
});
