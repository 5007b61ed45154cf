import { createServer, type Server } from 'node:net';
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { createGateway, type GatewayOptions, serveHttp } from '../../proxy/index';
import { type HttpFixture, startHttpFixture } from '../fixtures/http-fixture-server';
import { connectClient, memoryLogger, textOf } from '../proxy/helpers';

/**
 * Issue 11 item 4 (SSRF by default, SPEC §3.4): with no `load_control` block the model tried to
 * make the proxy connect to metadata addresses, 0.0.0.0, loopback spelled every way, the proxy's
 * own endpoint and data:/file: URLs. Runtime loads are https: to public addresses only, and the
 * address is checked in the connection's own lookup.
 */

type Resolver = NonNullable<GatewayOptions['loadResolver']>;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

/** An internal service on loopback that counts every TCP connection it gets (the SSRF target). */
async function internalService(): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const server: Server = createServer((socket) => {
    connections += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { port: address.port, connections: () => connections };
}

async function fixture(): Promise<HttpFixture> {
  const started = await startHttpFixture();
  cleanups.push(() => started.close());
  return started;
}

async function proxyClient(options: GatewayOptions = {}): Promise<{ client: Client; logs: string[] }> {
  const logger = memoryLogger();
  const gateway = createGateway({ embeddings: false, logger, ...options });
  cleanups.push(() => gateway.close());
  await gateway.start();
  return { client: await connectClient(gateway), logs: logger.lines };
}

async function load(client: Client, name: string, url: string): Promise<{ isError: boolean; text: string }> {
  const result = await client.callTool({ name: 'load_mcp_server', arguments: { server_name: name, url } });
  return { isError: result.isError === true, text: textOf(result) };
}

/** A resolver that maps attacker.example to the given answers in turn (the last one repeats). */
function sequenceResolver(...answers: string[]): { resolve: Resolver; asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    resolve: async (hostname) => {
      asked.push(hostname);
      if (hostname !== 'attacker.example') throw new Error(`unexpected lookup of ${hostname}`);
      const address = answers[Math.min(asked.length - 1, answers.length - 1)] ?? '';
      return [{ address, family: address.includes(':') ? 6 : 4 }];
    },
  };
}

describe('load_mcp_server with no load_control block', () => {
  it('refuses http:, IP literals in every spelling, localhost, 0.0.0.0, metadata, data: and file:', async () => {
    const target = await fixture();
    const { port } = new URL(target.url);
    const { client } = await proxyClient();
    const attempts = [
      target.url, // http://127.0.0.1:PORT/mcp
      `https://127.0.0.1:${port}/mcp`,
      `https://127.1:${port}/mcp`,
      `https://2130706433:${port}/mcp`,
      `https://0x7f.1:${port}/mcp`,
      `https://0.0.0.0:${port}/mcp`,
      `https://[::ffff:127.0.0.1]:${port}/mcp`,
      `https://[::1]:${port}/mcp`,
      `http://localhost:${port}/mcp`,
      `https://localhost:${port}/mcp`,
      'http://169.254.169.254/latest/meta-data/',
      'https://169.254.169.254/latest/meta-data/',
      'https://10.0.0.1/mcp',
      'data:text/plain,hello',
      'file:///etc/passwd',
    ];
    for (const [position, url] of attempts.entries()) {
      const result = await load(client, `probe${position}`, url);
      expect(result.isError, url).toBe(true);
      expect(result.text, url).toMatch(/^Refused to load "probe\d+": /);
    }
    expect(target.seen).toEqual([]);
  });

  it('never connects to the proxy itself', async () => {
    const logger = memoryLogger();
    const gateway = createGateway({ embeddings: false, logger });
    cleanups.push(() => gateway.close());
    const endpoint = await serveHttp(gateway, { host: '127.0.0.1', port: 0 });
    cleanups.push(() => endpoint.close());
    const client = await connectClient(gateway);
    const self = new URL(endpoint.url);
    for (const url of [endpoint.url, `http://localhost:${self.port}${self.pathname}`]) {
      const result = await load(client, 'myself', url);
      expect(result.text).toMatch(/^Refused to load "myself": /);
    }
    expect(logger.lines.some((line) => line.includes('"myself"'))).toBe(false);
  });

  it.each([
    ['the metadata address', '169.254.169.254'],
    ['a private address', '10.0.0.1'],
    ['an IPv4-mapped loopback address', '::ffff:127.0.0.1'],
    ['loopback', '127.0.0.1'],
  ])('refuses a host name that resolves to %s', async (_what, address) => {
    const service = await internalService();
    const resolver = sequenceResolver(address);
    const { client } = await proxyClient({ loadResolver: resolver.resolve });
    const result = await load(client, 'innocent', `https://attacker.example:${service.port}/mcp`);
    expect(result.isError).toBe(true);
    expect(result.text).toMatch(/attacker\.example" resolves to a private, loopback, link-local or reserved address/);
    expect(resolver.asked).toContain('attacker.example');
    expect(service.connections()).toBe(0);
  });

  it('DNS rebinding: public on the first lookup, loopback on the next: the connection is still refused', async () => {
    const service = await internalService();
    const resolver = sequenceResolver('93.184.215.14', '127.0.0.1');
    const { client, logs } = await proxyClient({ loadResolver: resolver.resolve });
    const result = await load(client, 'rebinder', `https://attacker.example:${service.port}/mcp`);
    expect(result.isError).toBe(true);
    expect(result.text).toMatch(/^Refused to load "rebinder": .*private, loopback, link-local or reserved/);
    // The connection made its own lookup (the second answer) and checked what it got.
    expect(resolver.asked.length).toBeGreaterThanOrEqual(2);
    expect(service.connections()).toBe(0);
    expect(logs.some((line) => line.startsWith('server "rebinder": connection refused'))).toBe(true);
  });
});

describe('the operator opt-in and load_control', () => {
  it('allowLocalhostLoads admits http://127.0.0.1 and localhost, and nothing else private', async () => {
    const target = await fixture();
    const { client } = await proxyClient({ allowLocalhostLoads: true });
    expect((await load(client, 'local', target.url)).text).toMatch(/Loaded "local" with \d+ tools/);
    const byName = target.url.replace('127.0.0.1', 'localhost');
    expect((await load(client, 'named', byName)).text).toMatch(/Loaded "named" with \d+ tools/);
    for (const url of [
      'http://10.0.0.1/mcp',
      'http://169.254.169.254/',
      'http://0.0.0.0/mcp',
      'http://example.com/mcp',
    ]) {
      expect((await load(client, 'other', url)).text, url).toMatch(/^Refused to load "other": /);
    }
  });

  it('load_control narrows further: an allow list without localhost refuses it even with the opt-in', async () => {
    const target = await fixture();
    const { client } = await proxyClient({
      allowLocalhostLoads: true,
      loadControl: { allowUrlPatterns: ['https://*.corp.example/*'] },
    });
    expect((await load(client, 'local', target.url)).text).toMatch(/not on the list of allowed server URLs/);
    expect(target.seen).toEqual([]);
  });

  it('load_control cannot widen the default: allowing every URL still refuses private addresses', async () => {
    const target = await fixture();
    const { client } = await proxyClient({ loadControl: { allowUrlPatterns: ['http://*/*', 'http://*:*/*'] } });
    expect((await load(client, 'local', target.url)).text).toMatch(/^Refused to load "local": /);
    expect(target.seen).toEqual([]);
  });
});

describe('operator-configured servers', () => {
  it('are trusted where they are, localhost included', async () => {
    const target = await fixture();
    const logger = memoryLogger();
    const gateway = createGateway({ embeddings: false, logger, servers: { local: { kind: 'http', url: target.url } } });
    cleanups.push(() => gateway.close());
    expect((await gateway.start()).connected).toEqual(['local']);
    expect((await gateway.admit('admitted', { kind: 'http', url: target.altUrl })).tools).toBeGreaterThan(0);
  });
});
