/**
 * Issue 31: at shutdown the proxy closed its downstreams under the calls in flight, so a call
 * that had run was cut and reported in doubt. Now one signal, or the end of stdin, drains: a new
 * request is refused (it never runs), each call already taken finishes and is answered, then the
 * downstreams close and the process exits 0. Driven from outside: the real CLI over stdio and over
 * Streamable HTTP, a real stdio downstream whose call is still running when the signal comes.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { textOf } from '../proxy/helpers';
import { type CliProcess, initialize, mortalConfig, startCli } from './fixtures/cli-process';
import { startHttpCli } from './fixtures/http-cli';

const children: ChildProcess[] = [];
const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** Resolves once the mortal downstream recorded a call labelled `label`: that call is running. */
async function running(stateDir: string, label: string): Promise<void> {
  const calls = join(stateDir, 'calls');
  while (!(existsSync(calls) && readFileSync(calls, 'utf8').split('\n').includes(label))) {
    await new Promise((settle) => setTimeout(settle, 20));
  }
}

/** `search_tools`, then a `call_tool` of `mortal__work` that takes 1.5 s, over raw JSON-RPC lines. */
async function slowCall(cli: CliProcess, label: string) {
  await cli.request(2, 'tools/call', { name: 'search_tools', arguments: { query: 'does one unit of work' } });
  return cli.request(3, 'tools/call', {
    name: 'call_tool',
    arguments: { tool_name: 'mortal__work', arguments: { label, delayMs: 1500 } },
  });
}

describe('shutdown of the stdio proxy', () => {
  it('on SIGTERM answers the call in flight, refuses a new request, and exits 0', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'emcp-drain-'));
    const cli = startCli(mortalConfig(stateDir));
    children.push(cli.child);
    await initialize(cli);
    await cli.stderrLine(/connected 1 of 1 servers/);
    const answer = slowCall(cli, 'in-flight');
    await running(stateDir, 'in-flight');

    cli.child.kill('SIGTERM');
    await cli.stderrLine(/SIGTERM: shutting down/);
    const refused = await cli.request(9, 'tools/list');
    expect(refused.error?.message).toMatch(/shutting down: the request was not run/);

    expect(textOf((await answer).result)).toMatch(/^done in-flight by \d+$/);
    expect(await cli.exited).toEqual({ code: 0, signal: null });
    // The refused request never reached the downstream: it ran the one call only.
    expect(readFileSync(join(stateDir, 'calls'), 'utf8')).toBe('in-flight\n');
  });

  it('at the end of stdin still answers the call it read, then exits 0', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'emcp-drain-'));
    const cli = startCli(mortalConfig(stateDir));
    children.push(cli.child);
    await initialize(cli);
    await cli.stderrLine(/connected 1 of 1 servers/);
    const answer = slowCall(cli, 'then-eof');
    await running(stateDir, 'then-eof');

    cli.child.stdin.end();
    expect(textOf((await answer).result)).toMatch(/^done then-eof by \d+$/);
    expect(await cli.exited).toEqual({ code: 0, signal: null });
  });

  it('in transparent mode, on SIGTERM answers the call in flight and exits 0', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'emcp-drain-'));
    const config = join(stateDir, 'proxy.yaml');
    const server = resolve('tests/gateway/mortal-stdio-server.ts');
    writeFileSync(
      config,
      `upstream:\n  command: ${JSON.stringify(process.execPath)}\n  args: ["--import", "tsx", ${JSON.stringify(server)}, ${JSON.stringify(stateDir)}]\n`,
    );
    const cli = startCli(config);
    children.push(cli.child);
    await initialize(cli);
    const answer = cli.request(2, 'tools/call', {
      name: 'work',
      arguments: { label: 'passed-through', delayMs: 1500 },
    });
    await running(stateDir, 'passed-through');

    cli.child.kill('SIGTERM');
    expect(textOf((await answer).result)).toMatch(/^done passed-through by \d+$/);
    expect(await cli.exited).toEqual({ code: 0, signal: null });
  });
});

describe('shutdown of the HTTP proxy', () => {
  const eras = {
    '2025-11-25 session': {},
    '2026-07-28 stateless': { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  } as const;

  it.each(Object.keys(eras) as (keyof typeof eras)[])(
    'on SIGTERM answers the call in flight of a %s client, refuses a new one with 503, and exits 0',
    async (era) => {
      const stateDir = mkdtempSync(join(tmpdir(), 'emcp-drain-'));
      const folder = mkdtempSync(join(tmpdir(), 'emcp-drain-http-'));
      writeFileSync(join(folder, 'config.json'), readFileSync(mortalConfig(stateDir)));
      const token = 'drain-token-0123456789abcdef';
      writeFileSync(join(folder, 'inbound'), `tester=${token}\n`);
      const { url, child } = await startHttpCli(folder, { started: (started) => children.push(started) });
      const exited = new Promise<number | null>((settle) => child.once('exit', settle));
      let stderr = '';
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const client = new Client({ name: 'drain-test', version: '1' }, eras[era]);
      await client.connect(
        new StreamableHTTPClientTransport(new URL(url), {
          requestInit: { headers: { authorization: `Bearer ${token}` } },
        }),
      );
      clients.push(client);
      const found = await client.callTool({ name: 'search_tools', arguments: { query: 'does one unit of work' } });
      // A 2026 client has no session: the search's handle opens the call.
      const handle = (found.structuredContent as { handle?: string } | undefined)?.handle;
      const answer = client.callTool({
        name: 'call_tool',
        arguments: { tool_name: 'mortal__work', arguments: { label: 'in-flight', delayMs: 1500 }, handle },
      });
      await running(stateDir, 'in-flight');

      child.kill('SIGTERM');
      while (!/shutting down/.test(stderr)) await new Promise((settle) => setTimeout(settle, 20));
      const refused = await fetch(url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} }),
      });
      expect(refused.status).toBe(503);
      expect(JSON.stringify(await refused.json())).toMatch(/shutting down: the request was not run/);

      expect(textOf(await answer)).toMatch(/^done in-flight by \d+$/);
      expect(await exited).toBe(0);
      expect(readFileSync(join(stateDir, 'calls'), 'utf8')).toBe('in-flight\n');
    },
  );
});
