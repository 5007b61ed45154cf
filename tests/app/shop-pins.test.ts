import { spawnSync } from 'node:child_process';
import { realpathSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult, Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { GET as stream } from '../../app/api/log/stream/route';
import { readHouseholdEnv } from '../../lib/env';
import type { HouseholdEvent } from '../../lib/events';
import { runHouseholdCli } from '../../lib/household-cli';
import { setHouseholdApp } from '../../lib/index';
import { type HouseholdRuntime, startHouseholdRuntime } from '../../lib/runtime';
import { generateShopPins, shopPinsFile } from '../../lib/shop-pins';
import { connectInMemory, readPinsFile } from '../../proxy/index';
import {
  createDeterministicClerk,
  createShop,
  createShopServer,
  loadOrCreateMerchantKey,
  openOrderStore,
} from '../../shop-agent/index';
import { textOf } from '../proxy/helpers';
import { createFakeApp, createFakeChat, readEvents, request } from './fake-chat';

// The demo's shop pins (issue 30, docs/pinning.md): the shipped file is what the shipped shop
// lists, and a household checks its shop's first listing against it, so an upgraded shop's new or
// changed tool is held for the operator's upgrade step, never found or called by a model.

describe('shop-agent/pins.json', () => {
  it('equals what npm run pins:shop generates from the current shop agent (regenerate it after changing a shop tool)', async () => {
    expect(readPinsFile(shopPinsFile)).toEqual(await generateShopPins());
  }, 60_000);
});

describe('an upgraded shop in the household', () => {
  let dataDir: string;
  let runtime: HouseholdRuntime;
  let client: Client;
  let closeOrders: () => void = () => undefined;
  const events: HouseholdEvent[] = [];

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'shop-pins-'));
    // The shipped shop, upgraded: one tool added. And the shipped pins, except that the `negotiate`
    // the file fixed is not the one this shop lists (as after an upgrade that reworded it).
    const key = await loadOrCreateMerchantKey(join(dataDir, 'shop'));
    const orders = openOrderStore(join(dataDir, 'shop', 'orders.sqlite'));
    closeOrders = () => orders.close();
    const shop = createShop({
      key,
      orders,
      clerk: createDeterministicClerk(),
      merchantName: 'Main Street Pizza',
      settlementDid: undefined,
    });
    const server = createShopServer({ shop });
    server.registerTool(
      'refund',
      { description: 'Refund an order to the card that paid it.', inputSchema: z.object({ orderId: z.string() }) },
      () => ({ content: [{ type: 'text', text: 'refunded' }] }),
    );
    const shipped = readPinsFile(shopPinsFile);
    const shopPins = { servers: { pizza: { ...shipped.servers.pizza, negotiate: 'e'.repeat(64) } } };
    runtime = await startHouseholdRuntime({
      env: readHouseholdEnv({ EXTENSIBLE_MCP_DATA: dataDir }),
      shop: { kind: 'in-process', server },
      shopPins,
      embeddings: false,
      onEvent: (event) => events.push(event),
    });
    client = await connectInMemory(runtime.gateway, { name: 'shop-pins-test', principal: { id: 'test' } });
    setHouseholdApp({ ...createFakeApp(createFakeChat()), log: runtime.audit });
  }, 60_000);
  afterAll(async () => {
    setHouseholdApp(undefined);
    await client?.close();
    await runtime?.close();
    closeOrders();
    await rm(dataDir, { recursive: true, force: true });
  });

  const search = async (query: string) => {
    const result = (await client.callTool({
      name: 'search_tools',
      arguments: { query, top_k: 50 },
    })) as CallToolResult;
    return textOf(result);
  };
  const call = async (tool: string, args: Record<string, unknown> = {}) =>
    (await client.callTool({ name: 'call_tool', arguments: { tool_name: tool, arguments: args } })) as CallToolResult;

  it('holds the added and the changed tool at the first listing, each a tool-held event', () => {
    const held = events.filter((event) => event.kind === 'tool-held');
    expect(held.map((event) => [event.data?.tool, event.data?.reason]).sort()).toEqual([
      ['negotiate', 'changed'],
      ['refund', 'new'],
    ]);
    expect(held.find((event) => event.data?.tool === 'negotiate')?.data).toMatchObject({
      server: 'pizza',
      pinned: 'e'.repeat(64),
    });
  });

  it('does not index them, and refuses a call naming the review; the shop’s other tools keep working', async () => {
    const found = await search('refund negotiate discount order menu');
    expect(found).not.toContain('pizza__refund');
    expect(found).not.toContain('pizza__negotiate');
    expect(found).toContain('pizza__get_menu');

    const refund = await call('pizza__refund');
    expect(refund.isError).toBe(true);
    expect(textOf(refund)).toBe(
      '"pizza__refund" is new to server "pizza" and is held for the operator\'s review (npm run household -- pins diff pizza refund).',
    );
    const negotiate = await call('pizza__negotiate');
    expect(negotiate.isError).toBe(true);
    expect(textOf(negotiate)).toContain("changed and is held for the operator's review");

    const menu = await call('pizza__get_menu');
    expect(menu.isError).not.toBe(true);
    // The merchant was pinned through `merchant_card`, which matched its shipped pin.
    expect(runtime.merchant?.name).toBe('Main Street Pizza');
  });

  it('puts the holds on the live log’s event stream', async () => {
    const response = await stream(request('/api/log/stream?kind=tool-held', { method: 'GET', origin: null }));
    expect(response.status).toBe(200);
    const rows = await readEvents<HouseholdEvent>(response, (seen) => seen.length >= 2);
    expect(rows.map((row) => row.data.data?.tool).sort()).toEqual(['negotiate', 'refund']);
    expect(rows.every((row) => row.data.outcome === 'deny')).toBe(true);
  });

  it('is accepted by no tool a model session reaches: the meta-tools and the household’s local tools', async () => {
    vi.stubEnv('EXTENSIBLE_MCP_DATA', dataDir);
    const status = async () => {
      const lines: string[] = [];
      expect(await runHouseholdCli(['pins', 'list', '--json'], (line) => lines.push(line))).toBe(0);
      return lines.join('\n');
    };
    try {
      const before = await status();
      expect(before).toContain('"pending-new"');
      // The session's whole surface: the three meta-tools, and through call_tool the local tools.
      expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual([
        'call_tool',
        'load_mcp_server',
        'search_tools',
      ]);
      expect(await search('pins accept pending tool operator review')).not.toMatch(/pins_accept|accept_pin/);
      const aimed = { server: 'pizza', tool: 'refund', decision: 'accept', all: true, invoice: 'accept pizza refund' };
      for (const name of ['request_approval', 'await_approval', 'record_fulfillment', 'pins_accept', 'pizza__refund']) {
        await call(name, aimed);
      }
      expect(
        (
          await client.callTool({
            name: 'load_mcp_server',
            arguments: { server_name: 'pizza', url: 'http://127.0.0.1:9/mcp' },
          })
        ).isError,
      ).toBe(true);
      expect(await status()).toBe(before);
      expect((await call('pizza__refund', { orderId: 'order-1' })).isError).toBe(true);
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('is accepted by the operator with npm run household -- pins accept, then found and called', async () => {
    vi.stubEnv('EXTENSIBLE_MCP_DATA', dataDir);
    try {
      const household = async (...argv: string[]) => {
        const lines: string[] = [];
        const code = await runHouseholdCli(['pins', ...argv], (line) => lines.push(line));
        return { code, out: lines.join('\n') };
      };
      const listed = await household('list');
      expect(listed.code).toBe(0);
      expect(listed.out).toMatch(/^pizza refund pending-new listed [0-9a-f]{12}$/m);
      expect(listed.out).toMatch(/^pizza negotiate pending-changed pinned eeeeeeeeeeee listed [0-9a-f]{12}$/m);
      const shown = await household('diff', 'pizza', 'refund');
      expect(shown.code).toBe(0);
      expect(shown.out).toContain('Refund an order to the card that paid it.');
      // Accepting everything is never the default.
      expect((await household('accept', 'pizza')).code).toBe(2);
      // A pid file left by an app that is gone is harmless: its process is not signalled.
      const gone = spawnSync(process.execPath, ['-e', '']).pid;
      const store = realpathSync(join(dataDir, 'household.sqlite'));
      writeFileSync(
        `${store}.pid`,
        JSON.stringify({ pid: gone, instance: 'a'.repeat(32), config: store, started: 'linux:gone:1' }),
      );
      const accepted = await household('accept', 'pizza', 'refund');
      expect(accepted.code).toBe(0);
      expect(accepted.out).toMatch(/^accepted pizza refund \([0-9a-f]{64}\)$/m);
      expect(accepted.out).toContain(
        "no running app signalled (pid file dead); the decision takes effect at the app's next start",
      );
      expect((await household('accept', 'pizza', 'refund')).code).toBe(1);
    } finally {
      vi.unstubAllEnvs();
    }
    // What the app's SIGHUP does (tests/e2e/pins-accept-reaches-the-running-app.spec.ts runs it
    // for real): the shop's listing checked against the store as it is now.
    await runtime.gateway.readmitPins();
    expect(await search('refund an order')).toContain('pizza__refund');
    const refund = await call('pizza__refund', { orderId: 'order-1' });
    expect(textOf(refund)).toBe('refunded');
    // The one not accepted is still held.
    expect((await call('pizza__negotiate')).isError).toBe(true);
  });
});
