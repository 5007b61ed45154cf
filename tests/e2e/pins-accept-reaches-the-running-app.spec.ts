import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createDeterministicClerk,
  createShop,
  createShopServer,
  didDocument,
  loadOrCreateMerchantKey,
  openOrderStore,
  type RunningHttpServer,
  startHttpServer,
} from '../../shop-agent/index';
import { type AppServer, root, startAppServer } from './support/app-server';

// Issue 30: `npm run household -- pins accept` reaches the running app (`next start`, the
// production build) without a restart. The shop is upgraded: it lists a `refund` tool the shipped
// pins do not hold, so the household holds it at its first listing. The operator accepts it with
// the real household command, which signals the process holding the household runtime through the
// pid file in the data folder; that process checks the shop's listing again, and the tool is found
// and called over /mcp with no restart.
const token = 'e2e-mcp-token-pins-accept-0123456789';
const run = promisify(execFile);
let shopDir: string;
let shop: RunningHttpServer;
let closeOrders: () => void = () => undefined;
let app: AppServer;
let client: Client;

beforeAll(async () => {
  shopDir = await mkdtemp(join(tmpdir(), 'e2e-upgraded-shop-'));
  const key = await loadOrCreateMerchantKey(shopDir);
  const orders = openOrderStore(join(shopDir, 'orders.sqlite'));
  closeOrders = () => orders.close();
  const merchant = createShop({
    key,
    orders,
    clerk: createDeterministicClerk(),
    merchantName: 'Main Street Pizza',
    settlementDid: undefined,
  });
  shop = await startHttpServer({
    createMcpServer: () => {
      const server = createShopServer({ shop: merchant });
      server.registerTool(
        'refund',
        { description: 'Refund an order to the card that paid it.', inputSchema: z.object({ orderId: z.string() }) },
        ({ orderId }) => ({ content: [{ type: 'text', text: `refunded ${orderId}` }] }),
      );
      return server;
    },
    didDocument: didDocument(key),
    host: '127.0.0.1',
    port: 0,
  });
  app = await startAppServer({
    EXTENSIBLE_MCP_HTTP_TOKEN: token,
    PIZZA_URL: `${shop.url}/mcp`,
    EXTENSIBLE_MCP_AUDIT_WITNESS: 'none',
  });
  client = new Client({ name: 'e2e-pins-accept', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${app.origin}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
});

afterAll(async () => {
  await client?.close();
  await app?.close();
  await shop?.close();
  closeOrders();
  await rm(shopDir, { recursive: true, force: true });
});

/** `npm run household -- …` on the app's data folder, as the operator runs it. */
async function household(...argv: string[]): Promise<{ code: number; out: string }> {
  try {
    const { stdout } = await run(
      process.execPath,
      ['node_modules/tsx/dist/cli.mjs', 'lib/household-main.ts', ...argv],
      {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', EXTENSIBLE_MCP_DATA: app.dataDir },
      },
    );
    return { code: 0, out: stdout };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, out: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

const search = async (query: string) => {
  const result = (await client.callTool({ name: 'search_tools', arguments: { query, top_k: 50 } })) as CallToolResult;
  return JSON.stringify(result.content);
};
const call = async (tool: string, args: Record<string, unknown> = {}) =>
  (await client.callTool({ name: 'call_tool', arguments: { tool_name: tool, arguments: args } })) as CallToolResult;
const textOf = (result: CallToolResult) =>
  result.content.map((part) => (part.type === 'text' ? part.text : '')).join('');

describe('npm run household -- pins accept reaches the running app (issue 30)', () => {
  it('holds the upgraded shop’s new tool: not found, refused naming the review', async () => {
    expect(await search('refund an order')).not.toContain('pizza__refund');
    const refused = await call('pizza__refund', { orderId: 'order-1' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toBe(
      '"pizza__refund" is new to server "pizza" and is held for the operator\'s review (npm run household -- pins diff pizza refund).',
    );
  });

  it('writes the pid file of the process that holds the household runtime', () => {
    const record = JSON.parse(readFileSync(join(app.dataDir, 'household.sqlite.pid'), 'utf8')) as { pid: number };
    // `next start` serves and runs the instrumentation hook in the process the launcher started.
    expect(record.pid).toBe(app.pid);
  });

  it('is accepted by the operator, signals the app, and is then found and called with no restart', async () => {
    const rechecked = app.printed(/pins: SIGHUP: re-checked the shop's listing/);
    const accepted = await household('pins', 'accept', 'pizza', 'refund');
    expect(accepted.out).toMatch(/^accepted pizza refund \([0-9a-f]{64}\)$/m);
    expect(accepted.out).toContain(`signalled the running app (pid ${app.pid})`);
    expect(accepted.code).toBe(0);
    await rechecked;
    expect(await search('refund an order')).toContain('pizza__refund');
    const refund = await call('pizza__refund', { orderId: 'order-1' });
    expect(refund.isError, textOf(refund)).not.toBe(true);
    expect(textOf(refund)).toBe('refunded order-1');
  });

  it('removes its pid file when it stops', async () => {
    const pidFile = join(app.dataDir, 'household.sqlite.pid');
    expect(existsSync(pidFile)).toBe(true);
    await app.stop();
    expect(existsSync(pidFile)).toBe(false);
  });
});
