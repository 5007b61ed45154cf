import { request as httpRequest } from 'node:http';
import type { ClientCapabilities, ElicitResult } from '@modelcontextprotocol/client';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupStack } from '../gateway/support';
import { ASKING_SERVER, type HttpProxyProcess, startHttpProxy, writeTemporary } from './cli-process';
import { EVERYTHING_ENTRY } from './helpers';

// Transparent mode over Streamable HTTP (SPEC §3.11): the real CLI with --http, real SDK clients,
// one upstream connection per client session, the session cap, and the same Host/Origin checks.
const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const ALL: ClientCapabilities = { elicitation: { form: {} }, sampling: {}, roots: {} };

function allText(result: unknown): string {
  const content = (result as { content?: unknown }).content;
  if (!Array.isArray(content)) return '';
  return content.map((block: { type?: string; text?: string }) => (block.type === 'text' ? block.text : '')).join('\n');
}

async function proxyFor(upstreamArgs: string[], extra: string[] = []): Promise<HttpProxyProcess> {
  const config = await writeTemporary(
    'config.yaml',
    `upstream:\n  command: ${JSON.stringify(process.execPath)}\n  args: ${JSON.stringify(upstreamArgs)}\n`,
  );
  const proxy = await startHttpProxy(config, extra);
  cleanups.push(() => proxy.stop());
  return proxy;
}

async function client(url: string, answer: () => ElicitResult | Promise<ElicitResult> = () => ({ action: 'cancel' })) {
  const connected = new Client({ name: 'http-client', version: '1.0.0' }, { capabilities: ALL });
  connected.setRequestHandler('elicitation/create', () => answer());
  connected.setRequestHandler('sampling/createMessage', () => ({
    model: 'm',
    role: 'assistant',
    content: { type: 'text', text: 'sampled over http' },
  }));
  connected.setRequestHandler('roots/list', () => ({
    roots: [{ uri: 'file:///projects/http', name: 'Http' }],
  }));
  await connected.connect(new StreamableHTTPClientTransport(new URL(url)));
  cleanups.push(() => connected.close());
  return connected;
}

/** A raw POST with chosen headers, to see the status the proxy answers with. */
function rawStatus(url: string, headers: Record<string, string>): Promise<number> {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      },
      (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      },
    );
    outgoing.once('error', reject);
    outgoing.end(body);
  });
}

describe('mcp-elicitation-proxy --http', () => {
  it('relays elicitation, sampling and roots to each HTTP client, tied to its call', async () => {
    const proxy = await proxyFor([EVERYTHING_ENTRY, 'stdio']);
    const connected = await client(proxy.url, () => ({ action: 'accept', content: { name: 'Over Http' } }));
    const { tools } = await connected.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(
      expect.arrayContaining(['trigger-elicitation-request', 'trigger-sampling-request', 'get-roots-list']),
    );
    const elicited = await connected.callTool({ name: 'trigger-elicitation-request', arguments: {} });
    expect(allText(elicited)).toContain('Name: Over Http');
    const sampled = await connected.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hi' } });
    expect(allText(sampled)).toContain('sampled over http');
    const roots = await connected.callTool({ name: 'get-roots-list', arguments: {} });
    expect(allText(roots)).toContain('file:///projects/http');
  });

  it('refuses an upstream form asking for a password over HTTP too', async () => {
    const proxy = await proxyFor(['--import', 'tsx', ASKING_SERVER]);
    let shown = 0;
    const connected = await client(proxy.url, () => {
      shown += 1;
      return { action: 'accept', content: { username: 'u', password: 'p' } };
    });
    await connected.listTools();
    const result = await connected.callTool({ name: 'connect_bank', arguments: {} });
    expect(JSON.parse(allText(result))).toMatchObject({ action: 'decline', fields: [] });
    expect(shown).toBe(0);
    await proxy.log.waitFor(/the upstream asked for a secret through a form; declined: "password"/);
  });

  it('opens one upstream process per client session', async () => {
    const proxy = await proxyFor(['--import', 'tsx', ASKING_SERVER, 'per-session']);
    const first = await client(proxy.url);
    const second = await client(proxy.url);
    await first.listTools();
    await second.listTools();
    const pidOf = async (connected: Client) =>
      allText(await connected.callTool({ name: 'whoami', arguments: {} })).match(/pid=(\d+)/)?.[1];
    const firstPid = await pidOf(first);
    expect(firstPid).toBeDefined();
    expect(await pidOf(first)).toBe(firstPid);
    expect(await pidOf(second)).not.toBe(firstPid);
  });

  it('caps sessions: with every session busy, another is refused', async () => {
    const proxy = await proxyFor([EVERYTHING_ENTRY, 'stdio'], ['--max-sessions', '1']);
    let release: () => void = () => undefined;
    const held = new Promise<ElicitResult>((resolve) => {
      release = () => resolve({ action: 'cancel' });
    });
    let asked: () => void = () => undefined;
    const formShown = new Promise<void>((resolve) => {
      asked = resolve;
    });
    const busy = await client(proxy.url, () => {
      asked();
      return held;
    });
    await busy.listTools();
    const running = busy.callTool({ name: 'trigger-elicitation-request', arguments: {} });
    await formShown;
    await expect(client(proxy.url)).rejects.toThrow(/Too many open sessions[^(]*\(1\)/);
    release();
    expect(allText(await running)).toContain('User cancelled');
  });

  it('checks Host and Origin like search mode does', async () => {
    const proxy = await proxyFor([EVERYTHING_ENTRY, 'stdio']);
    const port = new URL(proxy.url).port;
    expect(await rawStatus(proxy.url, { host: `attacker.example:${port}` })).toBe(403);
    expect(await rawStatus(proxy.url, { origin: 'http://attacker.example' })).toBe(403);
    expect(await rawStatus(proxy.url, {})).toBe(200);
  });
});
