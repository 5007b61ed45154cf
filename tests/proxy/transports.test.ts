import { request as httpRequest } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createGateway, type DownstreamSpec, type Gateway, memoryDiscoveryStore, serveHttp } from '../../proxy/index';
import { createFixtureServer } from '../fixtures/fixture-server';
import { type HttpFixture, startHttpFixture } from '../fixtures/http-fixture-server';
import { waitableLogger } from '../gateway/support';
import { callTool, connectClient, memoryLogger, searchNames, textOf } from './helpers';
import { connectHttpClient } from './http-client';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

const stdioFixture: DownstreamSpec = {
  kind: 'stdio',
  command: process.execPath,
  args: ['--import', 'tsx', 'tests/fixtures/stdio-fixture-server.ts'],
};
const everything: DownstreamSpec = {
  kind: 'stdio',
  command: process.execPath,
  args: ['node_modules/@modelcontextprotocol/server-everything/dist/index.js', 'stdio'],
};

async function started(options: Parameters<typeof createGateway>[0]): Promise<Gateway> {
  const proxy = createGateway({ embeddings: false, logger: memoryLogger(), ...options });
  cleanups.push(() => proxy.close());
  await proxy.start();
  return proxy;
}

async function httpFixture(): Promise<HttpFixture> {
  const fixture = await startHttpFixture();
  cleanups.push(() => fixture.close());
  return fixture;
}

/** Serves `proxy` over Streamable HTTP and connects two clients, each its own MCP session. */
async function twoHttpSessions(proxy: Gateway) {
  const endpoint = await serveHttp(proxy);
  cleanups.push(() => endpoint.close());
  const sessions = [await connectHttpClient(endpoint.url), await connectHttpClient(endpoint.url)] as const;
  cleanups.push(...sessions.map((client) => () => client.close()));
  return sessions;
}

describe('stdio downstreams', () => {
  it('search -> call round trip against server-everything over stdio', async () => {
    const client = await connectClient(await started({ servers: { everything } }));
    expect(await searchNames(client, 'echo back a message')).toContain('everything__echo');
    expect(textOf(await callTool(client, 'everything__echo', { message: 'over stdio' }))).toBe('Echo: over stdio');
  });

  it('restarts a child killed between calls on the next call, which succeeds', async () => {
    // Regression: the test once polled the pid, which can vanish before the proxy has read the
    // pipe's end; a call sent in that gap is (rightly) not replayed. Wait for the proxy to notice.
    const logger = waitableLogger();
    const client = await connectClient(await started({ servers: { fixture: stdioFixture }, logger }));
    expect(await searchNames(client, 'process id of the server')).toContain('fixture__whoami');
    const firstPid = Number(textOf(await callTool(client, 'fixture__whoami')));
    expect(firstPid).toBeGreaterThan(0);
    process.kill(firstPid, 'SIGKILL');
    await logger.waitFor('server "fixture": connection closed');
    const again = await callTool(client, 'fixture__whoami');
    expect(again.isError).toBeUndefined();
    const secondPid = Number(textOf(again));
    expect(secondPid).toBeGreaterThan(0);
    expect(secondPid).not.toBe(firstPid);
  });

  it('times out a hung downstream with a clear error and keeps serving other calls', async () => {
    const client = await connectClient(await started({ servers: { fixture: stdioFixture }, callTimeoutMs: 1_500 }));
    await searchNames(client, 'waits forever and never answers');
    await searchNames(client, 'echoes back the message');
    const hung = callTool(client, 'fixture__hang');
    // While the hung call is outstanding, other calls are served.
    expect(textOf(await callTool(client, 'fixture__echo', { message: 'still here' }))).toBe('echo: still here');
    const result = await hung;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/Server "fixture" did not answer "hang" within 1\.5 s/);
    expect(textOf(await callTool(client, 'fixture__echo', { message: 'after' }))).toBe('echo: after');
  });

  it('starts with some servers unreachable and says which', async () => {
    const logger = memoryLogger();
    const proxy = createGateway({
      embeddings: false,
      logger,
      servers: { fixture: stdioFixture, broken: { kind: 'stdio', command: 'definitely-not-a-command-xyz' } },
    });
    cleanups.push(() => proxy.close());
    const report = await proxy.start();
    expect(report.connected).toEqual(['fixture']);
    expect(report.failed.map((failure) => failure.name)).toEqual(['broken']);
    expect(logger.lines.some((line) => line.startsWith('server "broken" failed to start'))).toBe(true);
  });
});

describe('tool list changes', () => {
  it('re-indexes a downstream when it announces list_changed', async () => {
    const fixture = createFixtureServer();
    let announced: () => void = () => undefined;
    const reindexed = new Promise<void>((resolve) => {
      announced = resolve;
    });
    const logger = memoryLogger();
    const proxy = createGateway({
      embeddings: false,
      servers: { fixture: { kind: 'in-process', server: fixture } },
      logger: {
        ...logger,
        info: (line) => {
          logger.info(line);
          if (line.includes('tool list changed, re-indexed')) announced();
        },
      },
    });
    cleanups.push(() => proxy.close());
    await proxy.start();
    const client = await connectClient(proxy);
    expect(await searchNames(client, 'weather forecast for a city')).toEqual([]);
    fixture.registerTool('forecast', { description: 'Weather forecast for a city' }, () => ({
      content: [{ type: 'text', text: 'sunny' }],
    }));
    await reindexed;
    expect(await searchNames(client, 'weather forecast for a city')).toContain('fixture__forecast');
    expect(textOf(await callTool(client, 'fixture__forecast'))).toBe('sunny');
  });
});

describe('Streamable HTTP downstreams', () => {
  it('search -> call round trip against an HTTP fixture server', async () => {
    const fixture = await httpFixture();
    const client = await connectClient(await started({ servers: { remote: { kind: 'http', url: fixture.url } } }));
    expect(await searchNames(client, 'add two numbers')).toContain('remote__add');
    const result = await callTool(client, 'remote__add', { a: 20, b: 22 });
    expect(result.structuredContent).toEqual({ sum: 42 });
    expect(fixture.calls).toEqual([{ tool: 'add', args: { a: 20, b: 22 } }]);
  });

  it('never follows a redirect, and says where it pointed', async () => {
    const fixture = await httpFixture();
    const proxy = createGateway({
      embeddings: false,
      logger: memoryLogger(),
      allowLocalhostLoads: true,
      servers: { moved: { kind: 'http', url: fixture.redirectUrl } },
    });
    cleanups.push(() => proxy.close());
    expect((await proxy.start()).failed.map((failure) => failure.name)).toEqual(['moved']);
    expect(fixture.seen.map((request) => request.path)).toEqual(['/redirect']);
    const client = await connectClient(proxy);
    const loaded = await client.callTool({
      name: 'load_mcp_server',
      arguments: { server_name: 'other', url: fixture.redirectUrl },
    });
    expect(loaded.isError).toBe(true);
    expect(textOf(loaded)).toContain(`redirect (HTTP 307) to ${fixture.url}; redirects are never followed`);
    expect(fixture.seen.every((request) => request.path === '/redirect')).toBe(true);
  });

  it('load_mcp_server connects, indexes and lets the model call the new tools', async () => {
    const fixture = await httpFixture();
    const client = await connectClient(await started({ allowLocalhostLoads: true }));
    const loaded = await client.callTool({
      name: 'load_mcp_server',
      arguments: { server_name: 'runtime', url: fixture.url },
    });
    expect(textOf(loaded)).toMatch(/Loaded "runtime" with 5 tools/);
    expect(await searchNames(client, 'echoes back the message')).toContain('runtime__echo');
    expect(textOf(await callTool(client, 'runtime__echo', { message: 'loaded' }))).toBe('echo: loaded');
    const again = await client.callTool({
      name: 'load_mcp_server',
      arguments: { server_name: 'runtime', url: fixture.url },
    });
    expect(textOf(again)).toMatch(/already connected/);
  });
});

describe('the proxy served over Streamable HTTP', () => {
  it('keeps discovery per session: B cannot call what only A discovered; both can after their own search', async () => {
    const proxy = await started({ servers: { everything } });
    const [a, b] = await twoHttpSessions(proxy);
    expect((await a.listTools()).tools.map((tool) => tool.name)).toEqual([
      'search_tools',
      'call_tool',
      'load_mcp_server',
    ]);
    expect(await searchNames(a, 'echo back a message')).toContain('everything__echo');
    expect(textOf(await callTool(a, 'everything__echo', { message: 'A' }))).toBe('Echo: A');
    const refused = await callTool(b, 'everything__echo', { message: 'B' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/not been discovered in this session/);
    expect(await searchNames(b, 'echo back a message')).toContain('everything__echo');
    expect(textOf(await callTool(b, 'everything__echo', { message: 'B' }))).toBe('Echo: B');
  });

  it('forgets the oldest session when the bound is reached, which denies', async () => {
    const proxy = await started({ servers: { everything }, discoveryStore: memoryDiscoveryStore({ maxScopes: 1 }) });
    const [a, b] = await twoHttpSessions(proxy);
    await searchNames(a, 'echo back a message');
    await searchNames(b, 'echo back a message');
    expect(textOf(await callTool(b, 'everything__echo', { message: 'B' }))).toBe('Echo: B');
    const forgotten = await callTool(a, 'everything__echo', { message: 'A' });
    expect(forgotten.isError).toBe(true);
    expect(textOf(forgotten)).toMatch(/not been discovered in this session/);
  });

  it('refuses foreign Host headers (DNS rebinding) and non-initialize requests without a session', async () => {
    const proxy = await started({});
    const endpoint = await serveHttp(proxy);
    cleanups.push(() => endpoint.close());
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    };
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const { port } = new URL(endpoint.url);
    // fetch() will not forge Host, so speak HTTP directly as a rebinding page's browser would.
    const rebound = await new Promise<number>((resolve, reject) => {
      const body = JSON.stringify(initialize);
      const request = httpRequest(
        endpoint.url,
        { method: 'POST', headers: { ...headers, host: `attacker.example:${port}` } },
        (response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        },
      );
      request.on('error', reject);
      request.end(body);
    });
    expect(rebound).toBe(403);
    const noSession = await fetch(endpoint.url, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    expect(noSession.status).toBe(400);
    const garbage = await fetch(endpoint.url, { method: 'POST', headers, body: '{not json' });
    expect(garbage.status).toBe(400);
  });
});
