import { Client, LATEST_PROTOCOL_VERSION, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createHttpHandler,
  type Gateway,
  type HttpHandler,
  type HttpHandlerOptions,
  serveHttp,
} from '../../proxy/index';
import { createFixtureServer } from '../fixtures/fixture-server';
import { callTool, searchNames, textOf } from '../proxy/helpers';
import { cleanupStack, startedGateway } from './support';

// The web-standard Streamable HTTP handler, called directly with `Request` objects (as a Next.js
// route would be), then once through the Node adapter with a real SDK client.
const cleanups = cleanupStack();
afterEach(async () => {
  await cleanups.run();
  vi.useRealTimers();
});

const endpoint = 'http://localhost:3333/mcp';
const idleTimeoutMs = 60_000;
const maxBodyBytes = 4_096;
const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'probe', version: '1' } },
};
const listTools = { jsonrpc: '2.0', id: 2, method: 'tools/list' };

/** A POST to the endpoint with the headers a well-behaved client sends, plus `headers`. */
function post(body: unknown, headers: Record<string, string> = {}, url = endpoint): Request {
  return new Request(url, {
    method: 'POST',
    headers: {
      host: 'localhost:3333',
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function handlerFor(options: Partial<HttpHandlerOptions> = {}): Promise<HttpHandler> {
  const gateway: Gateway = await startedGateway(cleanups, {});
  const handler = createHttpHandler(gateway, {
    allowedHosts: ['localhost:3333'],
    allowedOrigins: ['http://localhost:3333'],
    maxSessions: 2,
    idleTimeoutMs,
    maxBodyBytes,
    ...options,
  });
  cleanups.push(() => handler.close());
  return handler;
}

/** Initializes a session and returns its id (the body is drained so the stream closes). */
async function openSession(handler: HttpHandler): Promise<string> {
  const response = await handler.handle(post(initialize));
  expect(response.status).toBe(200);
  const id = response.headers.get('mcp-session-id');
  expect(id).toMatch(/^[0-9a-f-]{36}$/);
  expect(await response.text()).toContain('"protocolVersion"');
  return id as string;
}

/** `tools/list` on a session: the status, and the body drained. */
async function listOn(handler: HttpHandler, session: string): Promise<{ status: number; body: string }> {
  const response = await handler.handle(post(listTools, { 'mcp-session-id': session }));
  return { status: response.status, body: await response.text() };
}

describe('createHttpHandler', () => {
  it('initializes a session and serves it by Mcp-Session-Id', async () => {
    const handler = await handlerFor();
    const session = await openSession(handler);
    expect(handler.sessions).toBe(1);
    const listed = await listOn(handler, session);
    expect(listed.status).toBe(200);
    expect(listed.body).toContain('"search_tools"');
  });

  it('refuses a foreign Host and a foreign Origin (DNS rebinding) before opening anything', async () => {
    const handler = await handlerFor();
    expect((await handler.handle(post(initialize, { host: 'attacker.example:3333' }))).status).toBe(403);
    expect((await handler.handle(post(initialize, { origin: 'http://attacker.example' }))).status).toBe(403);
    expect(handler.sessions).toBe(0);
    // The allowed origin is not refused.
    const allowed = await handler.handle(post(initialize, { origin: 'http://localhost:3333' }));
    expect(allowed.status).toBe(200);
    await allowed.text();
  });

  it('refuses a body over maxBodyBytes with 413', async () => {
    const handler = await handlerFor();
    const padded = { ...initialize, params: { ...initialize.params, padding: 'x'.repeat(2 * maxBodyBytes) } };
    expect((await handler.handle(post(padded))).status).toBe(413);
    expect(handler.sessions).toBe(0);
    // The limit also holds inside a session.
    const session = await openSession(handler);
    const oversized = { ...listTools, params: { padding: 'x'.repeat(2 * maxBodyBytes) } };
    expect((await handler.handle(post(oversized, { 'mcp-session-id': session }))).status).toBe(413);
  });

  it('stops reading a streamed body at the limit instead of buffering all of it', async () => {
    const handler = await handlerFor();
    const chunks = 64;
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled += 1;
        if (pulled > chunks) controller.close();
        else controller.enqueue(new Uint8Array(1_024).fill(0x20));
      },
    });
    const request = new Request(endpoint, {
      method: 'POST',
      headers: { host: 'localhost:3333', 'content-type': 'application/json', accept: 'application/json' },
      body,
      duplex: 'half',
    } as RequestInit);
    expect((await handler.handle(request)).status).toBe(413);
    expect(pulled).toBeLessThan(chunks);
  });

  it('refuses a declared Content-Length over the limit without reading the body', async () => {
    const handler = await handlerFor();
    let pulled = 0;
    // highWaterMark 0: the stream is pulled only when someone reads it.
    const body = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          pulled += 1;
          controller.enqueue(new TextEncoder().encode(JSON.stringify(initialize)));
          controller.close();
        },
      },
      { highWaterMark: 0 },
    );
    const request = new Request(endpoint, {
      method: 'POST',
      headers: {
        host: 'localhost:3333',
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'content-length': String(maxBodyBytes + 1),
      },
      body,
      duplex: 'half',
    } as RequestInit);
    expect((await handler.handle(request)).status).toBe(413);
    expect(pulled).toBe(0);
  });

  it('answers 400 to a non-initialize request without a session, 404 to an unknown session or path', async () => {
    const handler = await handlerFor();
    expect((await handler.handle(post(listTools))).status).toBe(400);
    expect((await handler.handle(post('{not json'))).status).toBe(400);
    const unknown = await handler.handle(post(listTools, { 'mcp-session-id': crypto.randomUUID() }));
    expect(unknown.status).toBe(404);
    expect((await handler.handle(post(initialize, {}, 'http://localhost:3333/other'))).status).toBe(404);
    expect(handler.sessions).toBe(0);
  });

  it('a session beyond maxSessions closes the least recently used idle one (issue 11: no lock-out)', async () => {
    const handler = await handlerFor();
    const first = await openSession(handler);
    const second = await openSession(handler);
    expect((await listOn(handler, first)).status).toBe(200);
    // `second` is now the least recently used: it makes room.
    const third = await openSession(handler);
    expect(handler.sessions).toBe(2);
    expect((await listOn(handler, second)).status).toBe(404);
    expect((await listOn(handler, first)).status).toBe(200);
    expect((await listOn(handler, third)).status).toBe(200);
  });

  it('concurrent initializes cannot overshoot maxSessions (regression: the bound was checked before any was registered)', async () => {
    const handler = await handlerFor();
    const answers = await Promise.all(Array.from({ length: 5 }, () => handler.handle(post(initialize))));
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 200, 503, 503, 503]);
    expect(handler.sessions).toBe(2);
  });

  it('the sweeper closes sessions idle for idleTimeoutMs; a used session stays; the slot is free again', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
    const handler = await handlerFor();
    const used = await openSession(handler);
    const idle = await openSession(handler);
    vi.advanceTimersByTime(idleTimeoutMs / 2);
    expect((await listOn(handler, used)).status).toBe(200);
    // The sweep at idleTimeoutMs: `idle` has been idle that long, `used` only half as long.
    vi.advanceTimersByTime(idleTimeoutMs / 2);
    expect(handler.sessions).toBe(1);
    expect((await listOn(handler, idle)).status).toBe(404);
    expect((await listOn(handler, used)).status).toBe(200);
    await openSession(handler);
    // Full again: one more evicts the least recently used idle session instead of being refused.
    await openSession(handler);
    expect(handler.sessions).toBe(2);
    expect((await listOn(handler, used)).status).toBe(404);
  });

  it('a new session sweeps expired ones first, even before the sweeper has run', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const handler = await handlerFor();
    const first = await openSession(handler);
    const second = await openSession(handler);
    vi.setSystemTime(Date.now() + idleTimeoutMs);
    await openSession(handler);
    expect(handler.sessions).toBe(1);
    expect((await listOn(handler, first)).status).toBe(404);
    expect((await listOn(handler, second)).status).toBe(404);
  });
});

describe('serveHttp', () => {
  it('serves search and call end to end to a real SDK client over Streamable HTTP on 127.0.0.1', async () => {
    const calls: unknown[] = [];
    const gateway = await startedGateway(cleanups, {
      servers: {
        fixture: { kind: 'in-process', server: createFixtureServer({ onCall: (_tool, args) => calls.push(args) }) },
      },
    });
    const served = await serveHttp(gateway);
    cleanups.push(() => served.close());
    expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const transport = new StreamableHTTPClientTransport(new URL(served.url));
    const client = new Client({ name: 'http-client', version: '1.0.0' });
    await client.connect(transport);
    cleanups.push(() => client.close());
    expect(transport.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual([
      'search_tools',
      'call_tool',
      'load_mcp_server',
    ]);
    expect(await searchNames(client, 'echoes back the message')).toContain('fixture__echo');
    expect(textOf(await callTool(client, 'fixture__echo', { message: 'over http' }))).toBe('echo: over http');
    expect(calls).toEqual([{ message: 'over http' }]);
  });

  it('reads a POST body straight off the socket under maxBodyBytes: 413 over it, unread bodies never parsed', async () => {
    const gateway = await startedGateway(cleanups, {});
    const served = await serveHttp(gateway, { maxBodyBytes });
    cleanups.push(() => served.close());
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    // Declared too large, and streamed too large without a Content-Length: both refused with the handler's 413.
    const declared = await fetch(served.url, { method: 'POST', headers, body: 'x'.repeat(maxBodyBytes + 1) });
    expect(declared.status).toBe(413);
    expect(await declared.text()).toContain(`larger than ${maxBodyBytes} bytes`);
    const chunk = new TextEncoder().encode('x'.repeat(1_024));
    const streamed = await fetch(served.url, {
      method: 'POST',
      headers,
      body: new ReadableStream({
        pull(controller) {
          controller.enqueue(chunk);
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(413);
    // A body within the limit is read whole and served.
    const opened = await fetch(served.url, { method: 'POST', headers, body: JSON.stringify(initialize) });
    expect(opened.status).toBe(200);
    expect(await opened.text()).toContain('"protocolVersion"');
  });
});
