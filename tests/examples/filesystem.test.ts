import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Client, Tool } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, searchNames, textOf } from '../proxy/helpers';
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

// examples/filesystem/config.json, exactly as committed, in front of the pinned
// @modelcontextprotocol/server-filesystem. The proxy passes `args` through unchanged, so the
// server resolves "./sandbox" against its working directory: the CLI runs in the example's
// folder, as the example's README says.
const folder = join(root, 'examples/filesystem');
const sandbox = join(folder, 'sandbox');
const config = 'examples/filesystem/config.json';
const serverEntry = join(root, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
const forwardLooking = new Set(['*__delete_*']);

// The proxy's tokens file beside the config. When the test has to make one, it holds a canary
// that must never come back through the filesystem server.
const tokensPath = join(folder, 'tokens');
const canary = `canary-${randomUUID()}`;
let createdTokens = false;

let realTools: Tool[] = [];
let cli: StdioSession;
let client: Client;

beforeAll(async () => {
  if (!existsSync(tokensPath)) {
    writeFileSync(tokensPath, `# test canary, removed after the run\nremote=${canary}\n`, { mode: 0o600 });
    createdTokens = true;
  }
  realTools = await listServerTools({ entry: serverEntry, args: [sandbox] });
  cli = await connectStdio({
    command: process.execPath,
    args: [bin, '--config', 'config.json'],
    cwd: folder,
    env: offlineEnvironment(),
  });
  // Searches below wait on the start's end, never on the search's 10 s grace for servers still connecting.
  await cli.untilStderr(/connected \d+ of \d+ servers/);
  client = cli.client;
}, 60_000);

afterAll(async () => {
  await cli?.close();
  if (createdTokens) rmSync(tokensPath, { force: true });
});

function qualifiedNames(): string[] {
  return realTools.map((tool) => `filesystem__${tool.name}`);
}

function hiddenTools(): Tool[] {
  const hidden = new Set([...matchesByPattern(denyPatterns(config), qualifiedNames()).values()].flat());
  return realTools.filter((tool) => hidden.has(`filesystem__${tool.name}`));
}

/** Finds a tool (so the discovery gate lets it through) and calls it. */
async function findAndCall(tool: string, args: Record<string, unknown>) {
  expect(await searchNames(client, `${tool.replaceAll('_', ' ')}`, 50)).toContain(`filesystem__${tool}`);
  return callTool(client, `filesystem__${tool}`, args);
}

describe('examples/filesystem through the CLI (real server-filesystem over stdio, real SDK client)', () => {
  it('every hiding rule matches at least one tool the pinned server really lists; the write tools are among them', () => {
    const patterns = denyPatterns(config);
    expect(patterns).toContain('*__delete_*');
    for (const [pattern, matched] of matchesByPattern(patterns, qualifiedNames())) {
      if (forwardLooking.has(pattern)) continue;
      expect(matched, `${pattern} hides nothing the server lists`).not.toEqual([]);
    }
    expect(hiddenTools().map((tool) => tool.name)).toEqual(
      expect.arrayContaining(['write_file', 'edit_file', 'move_file', 'create_directory']),
    );
  });

  it('search never returns a write tool, not even for its own description', async () => {
    for (const tool of hiddenTools()) {
      const found = await searchByOwnWords(client, tool);
      expect(found.length, `nothing found for ${tool.name}: the query proves nothing`).toBeGreaterThan(0);
      expect(found).not.toContain(`filesystem__${tool.name}`);
    }
  });

  it('control: every tool the rules leave visible is found by its own name and description', async () => {
    const hidden = new Set(hiddenTools().map((tool) => tool.name));
    for (const tool of realTools.filter((candidate) => !hidden.has(candidate.name))) {
      expect(await searchByOwnWords(client, tool)).toContain(`filesystem__${tool.name}`);
    }
  });

  it('a write tool called by its exact name is refused by access control, and nothing is written', async () => {
    const target = join(sandbox, `written-${randomUUID()}.txt`);
    for (const tool of hiddenTools()) {
      const result = await callTool(client, `filesystem__${tool.name}`, {
        path: target,
        content: 'x',
        edits: [],
        source: join(sandbox, 'welcome.md'),
        destination: target,
      });
      expect(result.isError).toBe(true);
      expect(textOf(result)).toContain(`Tool "filesystem__${tool.name}" is not available (blocked by access control).`);
    }
    expect(existsSync(target)).toBe(false);
  });

  it('read_file of a file in the sandbox works end to end', async () => {
    // Only the sandbox, and it stays so: the server's roots request at start is outside any call,
    // so the proxy answers it with no roots (issue 18) and the server keeps its own arguments.
    const allowed = textOf(await findAndCall('list_allowed_directories', {}));
    expect(allowed.split('\n').slice(1)).toEqual([sandbox]);
    expect(cli.stderr()).toContain('server "filesystem" sent roots/list; answered with no roots');
    const result = await findAndCall('read_file', { path: join(sandbox, 'welcome.md') });
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toBe(readFileSync(join(sandbox, 'welcome.md'), 'utf8'));
  });

  it('the tokens file the proxy uses sits outside the sandbox and cannot be read through the server', async () => {
    // The path the proxy itself logged, so this is the file it would read credentials from.
    expect(cli.stderr()).toContain(`tokens: ${tokensPath}`);
    // Relative paths resolve against the sandbox (the server's first allowed directory).
    for (const path of [tokensPath, '../tokens', `${sandbox}/../tokens`, `${sandbox}/./../../filesystem/tokens`]) {
      for (const tool of ['read_file', 'read_text_file', 'get_file_info']) {
        const result = await findAndCall(tool, { path });
        expect(result.isError, `${tool} ${path}`).toBe(true);
        expect(textOf(result)).toContain('Access denied');
        expect(JSON.stringify(result)).not.toContain(canary);
      }
    }
    const several = await findAndCall('read_multiple_files', { paths: [tokensPath, join(folder, 'config.json')] });
    expect(JSON.stringify(several)).not.toContain(canary);
    expect(textOf(several)).toContain('Access denied');
  });
});
