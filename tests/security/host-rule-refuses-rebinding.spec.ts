import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from '../e2e/support/app-server';

// Issue 26 defect 5 (DNS rebinding): a page whose name an attacker re-points at 127.0.0.1 reaches
// the app with its own name in `Host`. Every route — pages, streams, the audit, the approval window,
// the chat, /mcp and /api/health — must answer only for the configured origin's host. Driven over
// loopback against the real `next start`, with raw HTTP so the Host header is exactly what a
// rebinding browser would send.
let app: AppServer;
let port: number;
const mcpToken = 'host-rule-token-5b1e9c7d2a';

beforeAll(async () => {
  app = await startAppServer({ EXTENSIBLE_MCP_HTTP_TOKEN: mcpToken });
  port = Number(new URL(app.origin).port);
});
afterAll(async () => {
  await app?.close();
});

interface Answer {
  readonly status: number;
  readonly contentType: string;
  /** The first bytes of the body (streams are cut there). */
  readonly body: string;
}

/** One request with exactly this Host header (`null`: none at all); the body is read up to 4 KiB, then the socket is closed. */
function send(
  path: string,
  host: string | null,
  init: { readonly method?: string; readonly headers?: Record<string, string>; readonly body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method: init.method ?? 'GET',
        setHost: false,
        headers: { ...(host === null ? {} : { host }), ...init.headers },
      },
      (response) => {
        let body = '';
        const finish = () => {
          resolve({
            status: response.statusCode ?? 0,
            contentType: String(response.headers['content-type'] ?? ''),
            body,
          });
          request.destroy();
        };
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          body += chunk;
          // A stream that answered has said enough once its first event (or a few KiB) arrived.
          if (body.length > 4096 || /\n\n/.test(body)) finish();
        });
        response.on('end', finish);
      },
    );
    request.on('error', reject);
    request.end(init.body);
  });
}

const goodHost = () => `localhost:${port}`;
const routes: ReadonlyArray<
  readonly [string, { readonly method?: string; readonly headers?: Record<string, string>; readonly body?: string }]
> = [
  ['/', {}],
  ['/log', {}],
  ['/audit', {}],
  ['/audit/urn%3Auuid%3A00000000-0000-4000-8000-000000000000', {}],
  ['/approve', {}],
  ['/approve?as=parent', {}],
  ['/api/health', {}],
  ['/api/log/stream', {}],
  ['/api/chat/events', {}],
  ['/api/identity/pending?as=parent', {}],
  ['/.well-known/did.json', {}],
  [
    '/mcp',
    {
      method: 'POST',
      headers: {
        authorization: `Bearer ${mcpToken}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'rebinding', version: '1' } },
      }),
    },
  ],
];

describe('the Host rule on every route (DNS rebinding)', () => {
  it('the configured host is served: pages, streams, the audit, /mcp and /api/health answer', async () => {
    for (const [path, init] of routes) {
      const answer = await send(path, goodHost(), init);
      // The chat stream wants a session first (401): it still answered for this host.
      const expected = path === '/api/chat/events' ? 401 : path === '/api/identity/pending?as=parent' ? 401 : 200;
      expect(answer.status, `${path} for ${goodHost()}`).toBe(expected);
    }
    const stream = await send('/api/log/stream', goodHost());
    expect(stream.contentType).toMatch(/^text\/event-stream/);
  });

  it.each([
    ['a rebinding name on the same port', () => `attacker.example:${port}`],
    ['the loopback address itself', () => `127.0.0.1:${port}`],
    ['the right name on another port', () => `localhost:${port + 1}`],
    ['the right name without its port', () => 'localhost'],
    ['a suffix of the right host', () => `localhost:${port}.attacker.example`],
  ])('%s is refused on every route, and nothing of the household is in the answer', async (_name, host) => {
    for (const [path, init] of routes) {
      const answer = await send(path, host(), init);
      expect(answer.status, `${init.method ?? 'GET'} ${path} with Host ${host()}`).toBe(403);
      expect(answer.contentType, path).toMatch(/^text\/plain/);
      expect(answer.body, path).toMatch(/^Forbidden: unexpected Host header/);
      expect(answer.body, path).not.toMatch(/did:|event:|searchMode|<html/i);
    }
  });

  it('a request with no Host header at all is refused too', async () => {
    for (const [path, init] of routes) {
      const answer = await send(path, null, init);
      expect(answer.status, path).toBeGreaterThanOrEqual(400);
      expect(answer.body, path).not.toMatch(/did:|event:|searchMode|<html/i);
    }
  });
});
