import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DidDocument } from '../../shop-agent/index.js';
import { createSettlementFixture, type SettlementFixture } from '../../shop-agent/testing/settlement-fixture.js';
import { verifyWithDidDocument } from '../../shop-agent/testing/verify-with-did-document.js';
import { callTool, okContent, startHttpShop } from './support.js';

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

/** A raw GET with an explicit Host header (fetch does not let a test forge Host). */
function get(path: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      { host: '127.0.0.1', port: shop.port, path, method: 'GET', headers: { host } },
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
    outgoing.end();
  });
}

async function connect(): Promise<Client> {
  const client = new Client({ name: 'http-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${shop.port}/mcp`)));
  return client;
}

describe('shop agent over Streamable HTTP (child process)', () => {
  it('serves menu, negotiate, invoice and fulfil in a session', async () => {
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

  it('keeps separate sessions', async () => {
    const [a, b] = [await connect(), await connect()];
    try {
      const sessionA = (a.transport as StreamableHTTPClientTransport).sessionId;
      const sessionB = (b.transport as StreamableHTTPClientTransport).sessionId;
      expect(sessionA).toBeTruthy();
      expect(sessionA).not.toBe(sessionB);
      expect(okContent(await callTool(a, 'merchant_card')).did).toBe(okContent(await callTool(b, 'merchant_card')).did);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
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
    },
  );
});
