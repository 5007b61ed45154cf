import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StreamableHTTPClientTransport as V1StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DidDocument } from '../../shop-agent/index.js';
import { createSettlementFixture, type SettlementFixture } from '../../shop-agent/testing/settlement-fixture.js';
import { verifyWithDidDocument } from '../../shop-agent/testing/verify-with-did-document.js';
import {
  callTool,
  legacyClient,
  modernClient,
  okContent,
  recordingFetch,
  startHttpShop,
  type ToolCaller,
} from './support.js';

let dataDir: string;
let settlement: SettlementFixture;
let shop: Awaited<ReturnType<typeof startHttpShop>>;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'shop-http-'));
  settlement = await createSettlementFixture();
  shop = await startHttpShop({ SHOP_AGENT_DATA: dataDir, SHOP_SETTLEMENT_DID: settlement.did });
});
afterAll(async () => {
  await shop?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** A raw request with an explicit Host header (fetch does not let a test forge Host). */
function send(
  path: string,
  options: { host: string; method?: 'GET' | 'POST'; body?: string },
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      {
        host: '127.0.0.1',
        port: shop.port,
        path,
        method: options.method ?? 'GET',
        headers: {
          host: options.host,
          ...(options.body === undefined
            ? {}
            : { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }),
        },
      },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          body += chunk;
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      },
    );
    outgoing.on('error', reject);
    outgoing.end(options.body);
  });
}

const get = (path: string, host: string) => send(path, { host });

function mcpUrl(port = shop.port): URL {
  return new URL(`http://127.0.0.1:${port}/mcp`);
}

async function connect(): Promise<Client> {
  const client = new Client({ name: 'http-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(mcpUrl()));
  return client;
}

/** `get_menu` and a `negotiate` for three small cheese pizzas: the clerk's proposal at list price. */
async function menuAndNegotiation(client: ToolCaller): Promise<{ items: number; totalCents: number }> {
  const menu = okContent(await callTool(client, 'get_menu')) as { items: unknown[] };
  const negotiation = okContent(
    await callTool(client, 'negotiate', { message: 'discount?', items: [{ sku: 'small-cheese', qty: 3 }] }),
  ) as { proposal: { totalCents: number } };
  return { items: menu.items.length, totalCents: negotiation.proposal.totalCents };
}

const SHOP_TOOLS = ['cancel_order', 'fulfill', 'get_menu', 'merchant_card', 'negotiate', 'request_invoice'];

describe('shop agent over Streamable HTTP (child process)', () => {
  it('serves menu, negotiate, invoice and fulfil', async () => {
    const client = await connect();
    try {
      const menu = okContent(await callTool(client, 'get_menu')) as { items: unknown[] };
      expect(menu.items).toHaveLength(6);
      const card = okContent(await callTool(client, 'merchant_card')) as { did: string; didDocument: DidDocument };
      const negotiation = okContent(
        await callTool(client, 'negotiate', { message: 'discount?', items: [{ sku: 'small-cheese', qty: 3 }] }),
      ) as {
        proposal: { items: { sku: string; qty: number; unitPriceCents: number }[] };
      };
      const items = negotiation.proposal.items.map(({ sku, qty, unitPriceCents }) => ({ sku, qty, unitPriceCents }));
      const { invoice } = okContent(
        await callTool(client, 'request_invoice', { items, deliverTo: '1 Elm St', totalCents: 2700 }),
      ) as { invoice: string };
      const receipt = await settlement.signReceipt(settlement.subjectFor(invoice));
      const { commitment } = okContent(await callTool(client, 'fulfill', { receipt })) as { commitment: string };
      expect((await verifyWithDidDocument(commitment, card.didDocument)).vc).toMatchObject({
        type: ['VerifiableCredential', 'FulfilmentCommitment'],
      });

      const refused = await callTool(client, 'request_invoice', {
        items: [{ sku: 'small-cheese', qty: 21 }],
        deliverTo: '1 Elm St',
      });
      expect(refused.isError).toBe(true);
      expect(JSON.stringify(refused.structuredContent)).toContain('qty_out_of_range');
    } finally {
      await client.close();
    }
  });

  it('serves a 2026-07-28 client (v2 SDK, pinned) statelessly: it negotiates, lists the tools and calls them', async () => {
    const recorded = recordingFetch();
    const client = modernClient('modern-http');
    await client.connect(new StreamableHTTPClientTransport(mcpUrl(), { fetch: recorded.fetch }));
    try {
      expect(client.getProtocolEra()).toBe('modern');
      expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
      expect((client.transport as StreamableHTTPClientTransport).sessionId).toBeUndefined();
      expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(SHOP_TOOLS);
      expect(await menuAndNegotiation(client)).toEqual({ items: 6, totalCents: 2700 });
      // Its opening was the 2026 probe, never the 2025 handshake.
      expect(recorded.sent).toContain('server/discover');
      expect(recorded.sent).not.toContain('initialize');
    } finally {
      await client.close();
    }
  });

  it('serves a 2025-11-25 client (v1 SDK) per request: initialize is answered with no Mcp-Session-Id', async () => {
    const recorded = recordingFetch();
    const transport = new V1StreamableHTTPClientTransport(mcpUrl(), { fetch: recorded.fetch });
    const client = legacyClient('legacy-http');
    await client.connect(transport);
    try {
      expect(transport.protocolVersion).toBe('2025-11-25');
      expect(transport.sessionId).toBeUndefined();
      expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(SHOP_TOOLS);
      expect(await menuAndNegotiation(client)).toEqual({ items: 6, totalCents: 2700 });
      expect(recorded.sent[0]).toBe('initialize');
    } finally {
      await client.close();
    }
  });

  it('logs client-connected for each opening, with its era and the client it names', async () => {
    const opened = (client: string) =>
      shop.logged((line) => line.event === 'client-connected' && line.client === client);
    const modern = modernClient('logged-modern');
    await modern.connect(new StreamableHTTPClientTransport(mcpUrl()));
    const legacy = legacyClient('logged-legacy');
    await legacy.connect(new V1StreamableHTTPClientTransport(mcpUrl()));
    await Promise.all([modern.close(), legacy.close()]);
    expect(await opened('logged-modern')).toMatchObject({ era: 'modern', address: '127.0.0.1' });
    expect(await opened('logged-legacy')).toMatchObject({ era: 'legacy', address: '127.0.0.1' });
  });

  it('serves the DID document that matches merchant_card', async () => {
    const client = await connect();
    try {
      const card = okContent(await callTool(client, 'merchant_card')) as { didDocument: DidDocument };
      const response = await get('/.well-known/did.json', `localhost:${shop.port}`);
      expect(response.status).toBe(200);
      expect(JSON.parse(response.body)).toEqual(card.didDocument);
    } finally {
      await client.close();
    }
  });

  it.each(['evil.example', `evil.example:${7600}`, 'localhost.evil.example', 'user@localhost'])(
    'rejects a foreign Host header (%s)',
    async (host) => {
      const didResponse = await get('/.well-known/did.json', host);
      expect(didResponse.status).toBe(403);
      expect(didResponse.body).toMatch(/Invalid Host header/);
      expect((await get('/mcp', host)).status).toBe(403);
      expect((await get('/witness', host)).status).toBe(403);
    },
  );

  it('refuses a body over 1 MB with 413 before any handler runs, and keeps serving', async () => {
    const huge = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'x'.repeat(1_000_001), version: '1' },
      },
    });
    for (const path of ['/mcp', '/witness']) {
      const response = await send(path, { host: `127.0.0.1:${shop.port}`, method: 'POST', body: huge });
      expect(response.status).toBe(413);
      expect(response.body).toMatch(/Request body too large/);
    }
    const client = await connect();
    try {
      expect((await menuAndNegotiation(client)).items).toBe(6);
    } finally {
      await client.close();
    }
  });
});

describe('a shop restart between two calls of the same client (child processes)', () => {
  it('needs no re-initialisation: the 2026 and the 2025 client both go on with their next call', async () => {
    const restartDir = mkdtempSync(join(tmpdir(), 'shop-http-restart-'));
    const env = { SHOP_AGENT_DATA: restartDir };
    let first: Awaited<ReturnType<typeof startHttpShop>> | undefined = await startHttpShop(env);
    let second: Awaited<ReturnType<typeof startHttpShop>> | undefined;
    const port = first.port;
    const modernFetch = recordingFetch();
    const legacyFetch = recordingFetch();
    const modern = modernClient('restart-modern');
    const legacy = legacyClient('restart-legacy');
    try {
      await modern.connect(new StreamableHTTPClientTransport(mcpUrl(port), { fetch: modernFetch.fetch }));
      await legacy.connect(new V1StreamableHTTPClientTransport(mcpUrl(port), { fetch: legacyFetch.fetch }));
      const did = okContent(await callTool(modern, 'merchant_card')).did;
      expect(okContent(await callTool(legacy, 'merchant_card')).did).toBe(did);

      // The shop goes away and comes back on the same port and data folder: another process.
      await first.stop();
      first = undefined;
      second = await startHttpShop(env, { port });
      modernFetch.sent.length = 0;
      legacyFetch.sent.length = 0;

      expect(okContent(await callTool(modern, 'merchant_card')).did).toBe(did);
      expect(await menuAndNegotiation(modern)).toEqual({ items: 6, totalCents: 2700 });
      expect(okContent(await callTool(legacy, 'merchant_card')).did).toBe(did);
      // Each client sent its calls and nothing else: no probe, no handshake, no retry after a refusal.
      expect(modernFetch.sent).toEqual(['tools/call', 'tools/call', 'tools/call']);
      expect(legacyFetch.sent).toEqual(['tools/call']);
    } finally {
      await Promise.all([modern.close(), legacy.close()]);
      await first?.stop();
      await second?.stop();
      rmSync(restartDir, { recursive: true, force: true });
    }
  }, 90_000); // two child processes, each compiling TypeScript at start
});
