import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpShop } from '../shop-agent/support.js';

// Issue 11 item 20: the shop's HTTP server checked Host but not Origin, so a page on any other
// origin in the user's browser could drive the shop on localhost (a simple cross-site POST needs
// no preflight when the server does not care). A foreign Origin must be refused before any
// handler runs; requests without Origin (non-browser clients) and same-origin ones still work.
// Driven from outside: the real shop (`shop-agent/main.ts --http`) and raw HTTP requests.

let dataDir: string;
let shop: Awaited<ReturnType<typeof startHttpShop>>;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'shop-origin-'));
  shop = await startHttpShop({ SHOP_AGENT_DATA: dataDir });
});
afterAll(async () => {
  await shop?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'browser-page', version: '1' } },
});

/** A raw request as a browser would send it: Host is the shop, Origin is the page's. */
function send(options: {
  method: 'GET' | 'POST';
  path: string;
  origin?: string;
  body?: string;
}): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {
      host: `localhost:${shop.port}`,
      accept: 'application/json, text/event-stream',
      ...(options.origin === undefined ? {} : { origin: options.origin }),
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
    };
    const outgoing = request(
      { host: '127.0.0.1', port: shop.port, path: options.path, method: options.method, headers },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          body += chunk;
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body, headers: response.headers }));
      },
    );
    outgoing.on('error', reject);
    outgoing.end(options.body);
  });
}

describe('the shop refuses a foreign Origin (issue 11 item 20)', () => {
  it.each([
    'https://evil.example',
    'http://localhost.evil.example',
    'http://127.0.0.1.evil.example:80',
    'null',
    'http://localhost:1', // another port on localhost is another origin
  ])('refuses initialize from a page on %s before the MCP handler runs', async (origin) => {
    const response = await send({ method: 'POST', path: '/mcp', origin, body: INITIALIZE });
    expect(response.status).toBe(403);
    expect(response.body).toMatch(/Invalid Origin header/);
    expect(response.headers['mcp-session-id']).toBeUndefined();
    expect(response.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('refuses the DID document to a foreign Origin too (no handler runs)', async () => {
    const response = await send({ method: 'GET', path: '/.well-known/did.json', origin: 'https://evil.example' });
    expect(response.status).toBe(403);
  });

  it('still serves non-browser clients (no Origin) and its own origin', async () => {
    const plain = await send({ method: 'POST', path: '/mcp', body: INITIALIZE });
    expect(plain.status).toBe(200);
    // Served statelessly (issue 31): the handshake is answered, with no session to carry.
    expect(plain.body).toContain('"serverInfo"');
    expect(plain.headers['mcp-session-id']).toBeUndefined();
    const same = await send({
      method: 'POST',
      path: '/mcp',
      origin: `http://localhost:${shop.port}`,
      body: INITIALIZE,
    });
    expect(same.status).toBe(200);
  });
});
