import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, describe, expect, it } from 'vitest';
import { textOf } from '../proxy/helpers';

/**
 * Issue 11 item 15: one downstream that never answers `initialize` stalled the proxy's own
 * `initialize` until the connect timeout (~30 s), because the CLI awaited every server before
 * serving stdio. The proxy serves at once and reports that server as still connecting.
 */

const bin = resolve('bin/extensible-mcp.mjs');
const hangingServer = resolve('tests/security/fixtures/never-initialises.mjs');

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

/** The proxy's stderr as lines, with a way to wait for a line (no sleeps). */
function stderrLines(transport: StdioClientTransport) {
  const lines: string[] = [];
  const waiters: { pattern: RegExp; resolve: (line: string) => void }[] = [];
  let partial = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    partial += chunk.toString('utf8');
    const complete = partial.split('\n');
    partial = complete.pop() ?? '';
    for (const line of complete) {
      lines.push(line);
      for (const waiter of waiters.splice(0)) {
        if (waiter.pattern.test(line)) waiter.resolve(line);
        else waiters.push(waiter);
      }
    }
  });
  return {
    lines,
    waitFor: (pattern: RegExp) =>
      new Promise<string>((found) => {
        const seen = lines.find((line) => pattern.test(line));
        if (seen !== undefined) found(seen);
        else waiters.push({ pattern, resolve: found });
      }),
  };
}

describe('a downstream that never initialises', () => {
  it('does not stall the proxy: initialize and tools/list finish while its connect is still pending', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'emcp-hung-'));
    const config = join(folder, 'config.json');
    writeFileSync(
      config,
      // Pinned to the 2025 handshake: under `auto` the first process started is the SDK's probe
      // sibling, whose stderr is discarded (issue 31), and the line this test waits for never shows.
      JSON.stringify({
        mcpServers: { hung: { command: process.execPath, args: [hangingServer], protocol: '2025-11-25' } },
      }),
    );
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [bin, '--config', config, '--offline'],
      env: { ...process.env, EXTENSIBLE_MCP_MODEL_DIR: join(folder, 'no-model') } as Record<string, string>,
      stderr: 'pipe',
    });
    const stderr = stderrLines(transport);
    const client = new Client({ name: 'hung-test', version: '1.0.0' });
    cleanups.push(() => client.close());

    await client.connect(transport);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(['search_tools', 'call_tool', 'load_mcp_server']);
    // The hanging child was started and its connection attempt is still pending: start() has not
    // settled (it logs "connected N of M" when it does), yet the client is fully served.
    await stderr.waitFor(/server "hung" stderr: never-initialises: started/);
    const found = await client.callTool({ name: 'search_tools', arguments: { query: 'anything at all' } });
    // The model is told, not left to conclude the tools do not exist.
    expect(found.structuredContent).toMatchObject({ results: [], still_connecting: ['hung'] });
    expect(textOf(found)).toContain('Still connecting: hung; search again shortly.');
    await stderr.waitFor(/server "hung" is still connecting; its tools are not searchable yet/);
    expect(stderr.lines.some((line) => /connected \d+ of 1 servers|"hung" failed to start/.test(line))).toBe(false);
  });
});
