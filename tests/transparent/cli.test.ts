import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { describe, expect, it } from 'vitest';
import { runTransparentCli } from '../../proxy/cli/index';
import { runNode } from '../credentials/cli-run';
import { EVERYTHING_ENTRY } from './helpers';

const BIN = fileURLToPath(new URL('../../bin/mcp-elicitation-proxy.mjs', import.meta.url));

async function writeConfig(text: string): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), 'transparent-cli-'));
  const path = join(folder, 'config.yaml');
  await writeFile(path, text);
  return path;
}

/** Runs the bin to completion and collects its exit code and output. */
async function runBin(args: string[], env: Record<string, string> = {}, input?: { text: string; until: string }) {
  const { status, stdout, stderr } = await runNode([BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    ...(input && { input: input.text, closeStdinAfter: input.until }),
  });
  return { code: status, stdout, stderr };
}

/** A client's `initialize`, as one stdio line: the upstream opens only once it arrives. */
const INITIALIZE = `${JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'cli-test', version: '1' } },
})}\n`;

const GOOD = `
proxy:
  name: cli-test-proxy
upstream:
  command: ${JSON.stringify(process.execPath)}
  args: [${JSON.stringify(EVERYTHING_ENTRY)}, "stdio"]
tools:
  echo:
    elicit:
      message: "Echo what?"
`;

describe('mcp-elicitation-proxy bin', () => {
  it('exits 2 on a bad config and says what is wrong where', async () => {
    const path = await writeConfig(
      'upstream:\n  url: https://a.example/mcp\n  command: server\nelicitation:\n  enabled: maybe\n',
    );
    const { code, stderr } = await runBin(['--config', path]);
    expect(code).toBe(2);
    expect(stderr).toContain(`${path}: upstream: set exactly one of upstream.url`);
    expect(stderr).toContain(`${path}: elicitation.enabled: expected true or false`);
  });

  it('reads MCP_ELICITATION_PROXY_CONFIG and exits 2 when that file is missing', async () => {
    const missing = join(tmpdir(), 'no-such-folder-for-cli', 'config.yaml');
    const { code, stderr } = await runBin([], { MCP_ELICITATION_PROXY_CONFIG: missing });
    expect(code).toBe(2);
    expect(stderr).toContain(`${missing}: configuration file not found`);
  });

  it('exits 2 on a --store that is not a store URL, before opening anything', async () => {
    const path = await writeConfig(GOOD);
    const { code, stderr } = await runBin(['--config', path, '--store', 'mysql://db/pins']);
    expect(code).toBe(2);
    expect(stderr).toContain(
      '--store: "mysql://db/pins" is not a store URL; use sqlite:FILE, postgres://… or memory:.',
    );
    expect(existsSync(join(dirname(path), 'proxy.sqlite'))).toBe(false);
  });

  it('exits 2 without any config and 0 with --help', async () => {
    const none = await runBin([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('pass --config FILE or set MCP_ELICITATION_PROXY_CONFIG');
    const help = await runBin(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--config FILE');
  });

  it('exits 1 when the upstream command cannot start', async () => {
    const path = await writeConfig('upstream:\n  command: /nonexistent/upstream-binary\n');
    const { code, stdout, stderr } = await runBin(
      ['--config', path],
      {},
      { text: INITIALIZE, until: 'Cannot connect' },
    );
    expect(code).toBe(1);
    expect(stderr).toContain('Cannot connect to the upstream MCP server (command /nonexistent/upstream-binary)');
    // The client's initialize is answered with the reason, not left hanging.
    expect(JSON.parse(stdout)).toMatchObject({ id: 1, error: { message: expect.stringContaining('Cannot connect') } });
  });

  it('exits 0 when the client closes its end of stdio', async () => {
    const path = await writeConfig(GOOD);
    const child = spawn(process.execPath, [BIN, '--config', path], { stdio: ['pipe', 'pipe', 'pipe'] });
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    // Wait for the "serving" line, then hang up like a client would.
    await new Promise<void>((resolve) => {
      let seen = '';
      child.stderr.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        if (seen.includes('serving command')) resolve();
      });
    });
    child.stdin.end();
    await expect(exited).resolves.toBe(0);
  });

  it('serves a real client over stdio end to end, with elicitation', async () => {
    const path = await writeConfig(GOOD);
    const client = new Client({ name: 'cli-e2e', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    const messages: string[] = [];
    client.setRequestHandler('elicitation/create', (request) => {
      messages.push(request.params.message);
      return { action: 'accept', content: { message: 'over stdio' } };
    });
    await client.connect(
      new StdioClientTransport({ command: process.execPath, args: [BIN, '--config', path], stderr: 'ignore' }),
    );
    try {
      expect(client.getServerVersion()?.name).toBe('cli-test-proxy');
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toContain('echo');
      const result = await client.callTool({ name: 'echo', arguments: {} });
      expect(result.content).toEqual([{ type: 'text', text: 'Echo: over stdio' }]);
      expect(messages).toEqual(['Echo what?']);
    } finally {
      await client.close();
    }
  });
});

describe('runTransparentCli with an HTTP upstream', () => {
  it('never follows a redirect from the upstream URL', async () => {
    let followed = false;
    const server = createServer((request, response) => {
      if (request.url === '/elsewhere') {
        followed = true;
        response.writeHead(500).end();
        return;
      }
      response.writeHead(302, { location: '/elsewhere' }).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const path = await writeConfig(`upstream:\n  url: http://127.0.0.1:${port}/mcp\n`);
    const stderr = new PassThrough();
    let errors = '';
    stderr.on('data', (chunk: Buffer) => {
      errors += chunk.toString();
    });
    try {
      const stdin = new PassThrough();
      stdin.write(INITIALIZE);
      const code = await runTransparentCli(['--config', path], {
        stdin,
        stdout: new PassThrough(),
        stderr,
      });
      expect(code).toBe(1);
      expect(errors).toMatch(/redirect \(HTTP 302\) to http:\/\/127\.0\.0\.1:\d+\/elsewhere/);
      expect(followed).toBe(false);
    } finally {
      server.close();
    }
  });
});
