/**
 * Issue 29, transparent mode inside the household: the shop served transparently (its own tool
 * names, a connection of its own to the real shop process per session) and gated by the
 * household's real `CallApprovalGate`, evidence ledger and audit chain. `cancel_order` carries
 * `confirm_if: {always: true, passkey: [child]}`: it reaches the shop only after the child's
 * passkey over exactly that call, once; a second use of the approval, or an approval over other
 * arguments, is refused. The transparent CLI on its own (no gate) still refuses the same rule with
 * `confirmation_unavailable` and forwards nothing. The app's `/mcp/pizza` endpoint serves the same
 * to 2025-11-25 and 2026-07-28 clients holding one of `/mcp`'s tokens, and waits for the passkey
 * the protocol's way with clients that declared URL elicitation: `input_required` with the
 * window's URL and a signed state (2026-07-28), URL-mode elicitation in the open call (2025-11-25).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  type CallToolResult,
  Client,
  type ClientCapabilities,
  type ElicitRequestURLParams,
  InMemoryTransport,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Role } from '../../identity/index';
import { createShopMcpEndpoint, type McpEndpoint } from '../../lib/index';
import { callHashOf } from '../../proxy/index';
import { assertCall } from '../identity/call-approval-support';
import { startTestHousehold, type TestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';
import { TRANSPARENT_BIN } from '../transparent/cli-process';

/** The qualified name the approval is over: the transparent proxy is named after the shop's server. */
const qualified = 'pizza__cancel_order';
let household: TestHousehold;
let client: Client;
const scratch: string[] = [];

beforeAll(async () => {
  household = await startTestHousehold();
  const shop = household.runtime.transparentShop;
  if (shop === undefined) throw new Error('the household serves no transparent shop');
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await shop.open({ id: 'token:agent' }).connect(serverSide);
  client = new Client({ name: 'transparent-agent', version: '1.0.0' });
  await client.connect(clientSide);
}, 60_000);
afterAll(async () => {
  await client?.close();
  await household?.close();
  await Promise.all(scratch.map((dir) => rm(dir, { recursive: true, force: true })));
});

/** A fresh order at the shop through the transparent proxy, not delivered: its invoice id. */
async function order(): Promise<string> {
  const result = (await client.callTool({
    name: 'request_invoice',
    arguments: { items: [{ sku: 'cheese-slice', qty: 1 }], deliverTo: '12 Main St' },
  })) as CallToolResult;
  if (result.isError) throw new Error(`no invoice: ${textOf(result)}`);
  const { invoiceId } = JSON.parse(textOf(result)) as { invoiceId: string };
  return invoiceId;
}

async function cancel(args: Record<string, unknown>, through: Client = client): Promise<CallToolResult> {
  return (await through.callTool({ name: 'cancel_order', arguments: args })) as CallToolResult;
}

/** The approval request a refused call names. */
function requestOf(result: CallToolResult): { requestId: string; approveUrls: Record<string, string> } {
  const detail = (
    result.structuredContent as { approvalRequired?: { requestId: string; approveUrls: Record<string, string> } }
  )?.approvalRequired;
  if (detail === undefined) throw new Error(`no approval request in: ${textOf(result)}`);
  return detail;
}

/** `role` approves exactly `args` with a real passkey assertion over their call hash. */
async function approve(requestId: string, args: Record<string, unknown>, signer: Role = 'child') {
  const assertion = assertCall(
    household.members[signer].authenticator,
    callHashOf({ tool: qualified, arguments: args }),
  );
  return household.runtime.identity.callApprovals.approve({ requestId, role: 'child', assertion });
}

/** The order is still open at the shop: a fresh approval of the same cancel goes through (and cancels it). */
async function stillOpen(args: Record<string, unknown>): Promise<boolean> {
  const { requestId } = requestOf(await cancel(args));
  expect(await approve(requestId, args)).toMatchObject({ ok: true });
  const result = await cancel(args);
  return !result.isError && (result.structuredContent as { cancelled?: boolean })?.cancelled === true;
}

describe('the transparent shop inside the household, gated by the child’s passkey', () => {
  it('lists the shop’s own tools under their own names', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(['request_invoice', 'cancel_order']));
    expect(tools.map((tool) => tool.name)).not.toContain('search_tools');
  });

  it('forwards cancel_order only after the child’s passkey over exactly it, and only once', async () => {
    const invoiceId = await order();
    const args = { invoiceId, reason: 'ordered twice' };
    const refused = await cancel(args);
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/^approval_required: pizza__cancel_order runs only after the child/);
    const { requestId, approveUrls } = requestOf(refused);
    expect(approveUrls).toEqual({ child: `http://localhost:3000/approve?as=child&request=${requestId}` });
    // Asked again before anyone approved: the same request, and still nothing sent.
    expect(requestOf(await cancel(args)).requestId).toBe(requestId);
    expect(await approve(requestId, args)).toMatchObject({ ok: true, record: { status: 'approved' } });

    const forwarded = await cancel(args);
    expect(forwarded.isError, textOf(forwarded)).toBeFalsy();
    expect(forwarded.structuredContent).toMatchObject({ invoiceId, cancelled: true });
    expect((await household.runtime.identity.callApprovals.get(requestId))?.status).toBe('used');
    // The same call again is not forwarded on the spent approval: it asks afresh.
    const again = await cancel(args);
    expect(again.isError).toBe(true);
    expect(requestOf(again).requestId).not.toBe(requestId);
    // The decision is on the audit chain with the approval it spent, as search mode's is.
    const rows = await household.runtime.audit.after(0, { filter: { kind: 'approval-decision', outcome: 'allow' } });
    expect(rows.filter((row) => row.event.approvalId === requestId)).toHaveLength(1);
  });

  it('refuses a second use of the same approval', async () => {
    const invoiceId = await order();
    const args = { invoiceId };
    const { requestId } = requestOf(await cancel(args));
    expect(await approve(requestId, args)).toMatchObject({ ok: true });
    const record = await household.runtime.identity.store.callApprovals.get(requestId);
    if (record === undefined) throw new Error('no request');
    expect((await cancel(args)).isError).toBeFalsy();
    // The same approval replayed through a second request row: the ledger has it spent.
    await household.runtime.identity.store.callApprovals.create({
      ...record,
      requestId: 'transparent-replayed-1',
      status: 'approved',
      createdAt: Date.now() + 60_000,
    });
    const replayed = await cancel(args);
    expect(replayed.isError).toBe(true);
    expect(textOf(replayed)).toBe(
      'Refused: this approval has already been used. An approval authorises its call once; ask for a new one.',
    );
  });

  it('refuses an approval over other arguments, and forwards nothing', async () => {
    const invoiceId = await order();
    const approved = { invoiceId, reason: 'ordered twice' };
    const changedArgs = { invoiceId, reason: 'ordered twice!' };
    const { requestId } = requestOf(await cancel(approved));
    expect(await approve(requestId, approved)).toMatchObject({ ok: true });
    // The agent sends another reason: another hash, so the approval does not apply.
    const changed = await cancel(changedArgs);
    expect(changed.isError).toBe(true);
    expect(textOf(changed)).toMatch(/^approval_required:/);
    const changedRequest = requestOf(changed).requestId;
    expect(changedRequest).not.toBe(requestId);
    // Even a lookup that hands the approval to the changed call is refused field by field.
    const store = household.runtime.identity.store.callApprovals;
    const record = await store.get(requestId);
    if (record === undefined) throw new Error('no request');
    await store.transition(changedRequest, { from: ['pending'], to: 'expired', now: Date.now() });
    await store.create({
      ...record,
      requestId: 'transparent-forged-1',
      callHash: callHashOf({ tool: qualified, arguments: changedArgs }),
      createdAt: Date.now() + 60_000,
    });
    const forged = await cancel(changedArgs);
    expect(forged.isError).toBe(true);
    expect(textOf(forged)).toBe(
      "Refused: the child's approval: it approves other arguments than this call has. Ask for approval of exactly this call.",
    );
    await store.transition('transparent-forged-1', { from: ['approved'], to: 'expired', now: Date.now() });
    // Nothing reached the shop: the order is still open.
    expect(await stillOpen(changedArgs)).toBe(true);
  });

  it('the transparent CLI on its own (no gate) refuses the same rule with confirmation_unavailable', async () => {
    const invoiceId = await order();
    const dir = mkdtempSync(join(tmpdir(), 'transparent-shop-cli-'));
    scratch.push(dir);
    const config = join(dir, 'proxy.yaml');
    // The same shop, on the household's shop data, with the household's rule for cancel_order.
    writeFileSync(
      config,
      [
        'proxy:',
        '  name: pizza',
        'upstream:',
        `  command: ${JSON.stringify(process.execPath)}`,
        `  args: ["--import", "tsx", ${JSON.stringify(resolve('shop-agent/main.ts'))}]`,
        '  env:',
        `    SHOP_AGENT_DATA: ${JSON.stringify(join(household.dataDir, 'shop'))}`,
        'tools:',
        '  cancel_order:',
        '    confirm_if:',
        '      always: true',
        '      passkey: [child]',
        '',
      ].join('\n'),
    );
    const alone = new Client(
      { name: 'transparent-cli', version: '1.0.0' },
      { capabilities: { elicitation: { form: {} } } },
    );
    alone.setRequestHandler('elicitation/create', () => ({ action: 'accept', content: { confirm: true } }));
    await alone.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [TRANSPARENT_BIN, '--config', config],
        stderr: 'ignore',
      }),
    );
    try {
      const result = (await alone.callTool({ name: 'cancel_order', arguments: { invoiceId } })) as CallToolResult;
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toMatchObject({ reason: 'confirmation_unavailable', tool: 'cancel_order' });
    } finally {
      await alone.close();
    }
    expect(await stillOpen({ invoiceId })).toBe(true);
  }, 30_000);
});

describe('/mcp/pizza: the transparent shop over the app’s endpoint', () => {
  const origin = 'http://localhost:3000';
  const host = 'localhost:3000';
  const token = 'shop-endpoint-token-0123456789abcdef';
  let endpoint: McpEndpoint;
  const opened: Client[] = [];
  beforeAll(() => {
    endpoint = createShopMcpEndpoint({
      shop: household.runtime.transparentShop,
      origin,
      tokens: [{ name: 'external', token }],
    });
  });
  afterAll(async () => {
    await Promise.allSettled(opened.map((each) => each.close()));
    await endpoint?.close();
  });

  /**
   * A v2 client on the endpoint, its requests handed to the route as Next.js would; `modern` pins
   * 2026-07-28, `capabilities` are what it declares.
   */
  async function connect(modern: boolean, bearer = token, capabilities: ClientCapabilities = {}): Promise<Client> {
    const http = new Client(
      { name: modern ? 'shop-2026' : 'shop-2025', version: '1.0.0' },
      { capabilities, ...(modern && { versionNegotiation: { mode: { pin: '2026-07-28' } } }) },
    );
    await http.connect(
      new StreamableHTTPClientTransport(new URL(`${origin}/mcp/pizza`), {
        requestInit: { headers: { authorization: `Bearer ${bearer}` } },
        // The browser-facing Host rule: the app's own host, as behind Next.js.
        fetch: (input, init) =>
          endpoint.handle(
            new Request(input, { ...init, headers: { ...Object.fromEntries(new Headers(init?.headers)), host } }),
          ),
      }),
    );
    opened.push(http);
    return http;
  }

  it('answers 401 without a token and 404 when no token is configured', async () => {
    const refused = await endpoint.handle(
      new Request(`${origin}/mcp/pizza`, {
        method: 'POST',
        headers: { host, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: '{}',
      }),
    );
    expect(refused.status).toBe(401);
    const absent = createShopMcpEndpoint({ shop: household.runtime.transparentShop, origin, tokens: [] });
    expect(absent.enabled).toBe(false);
    expect((await absent.handle(new Request(`${origin}/mcp/pizza`))).status).toBe(404);
  });

  it.each([
    ['a 2025-11-25 session', false],
    ['a 2026-07-28 client', true],
  ])('%s: the shop’s own tools, and cancel_order only after the child’s passkey', async (_, modern) => {
    const http = await connect(modern);
    const { tools } = await http.listTools();
    expect(tools.map((each) => each.name)).toEqual(expect.arrayContaining(['request_invoice', 'cancel_order']));
    const args = { invoiceId: await order(), reason: modern ? 'over 2026' : 'over 2025' };
    const refused = await cancel(args, http);
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/^approval_required: pizza__cancel_order runs only after the child/);
    const { requestId } = requestOf(refused);
    expect(await approve(requestId, args)).toMatchObject({ ok: true });
    const forwarded = await cancel(args, http);
    expect(forwarded.isError, textOf(forwarded)).toBeFalsy();
    expect(forwarded.structuredContent).toMatchObject({ invoiceId: args.invoiceId, cancelled: true });
    // The audit row names the endpoint's client, as /mcp's do.
    const rows = await household.runtime.audit.after(0, { filter: { kind: 'approval-decision', outcome: 'allow' } });
    expect(rows.find((row) => row.event.approvalId === requestId)?.event.data).toMatchObject({
      tool: 'pizza__cancel_order',
      principal: 'token:external',
    });
  });

  /** `role` approves, in the window `windowUrl` names, exactly `args`. */
  async function approveIn(windowUrl: string, args: Record<string, unknown>) {
    const requestId = new URL(windowUrl).searchParams.get('request') ?? '';
    expect(await approve(requestId, args)).toMatchObject({ ok: true });
  }

  /** A client that opens every URL it is sent, the child approving `args` there as it does. */
  async function opening(modern: boolean, args: Record<string, unknown>) {
    const http = await connect(modern, token, { elicitation: { form: {}, url: {} } });
    const asked: ElicitRequestURLParams[] = [];
    const completed: string[] = [];
    http.setRequestHandler('elicitation/create', (request) => {
      const params = request.params as ElicitRequestURLParams;
      if (params.mode !== 'url') throw new Error(`expected a URL ask, got ${JSON.stringify(params)}`);
      asked.push(params);
      void approveIn(params.url, args);
      return { action: 'accept' };
    });
    http.setNotificationHandler('notifications/elicitation/complete', (notification) => {
      completed.push(notification.params.elicitationId);
    });
    return { http, asked, completed };
  }

  it('a 2026-07-28 client that opens URLs is sent to the child’s window, and its own retry runs the cancel, once', async () => {
    const args = { invoiceId: await order(), reason: 'asked the 2026 way' };
    const { http, asked } = await opening(true, args);
    const cancelled = await cancel(args, http);
    expect(cancelled.isError, textOf(cancelled)).toBeFalsy();
    expect(cancelled.structuredContent).toMatchObject({ invoiceId: args.invoiceId, cancelled: true });
    expect(asked).toHaveLength(1);
    const requestId = new URL(asked[0]?.url ?? '').searchParams.get('request') ?? '';
    expect(asked[0]?.url).toBe(`${origin}/approve?as=child&request=${requestId}`);
    expect(asked[0]?.message).toMatch(/^The child approves or declines exactly this call of pizza__cancel_order/);
    expect((await household.runtime.identity.callApprovals.get(requestId))?.status).toBe('used');
    expect((await cancel(args)).structuredContent).toMatchObject({ approvalRequired: {} });
  });

  it('a 2026-07-28 client gets input_required with a signed state: a tampered state is refused, a retry after a decline gets the reason and forwards nothing', async () => {
    const args = { invoiceId: await order(), reason: 'declined the 2026 way' };
    const http = await connect(true, token, { elicitation: { form: {}, url: {} } });
    const call = (extra: Record<string, unknown> = {}) =>
      http.callTool({ name: 'cancel_order', arguments: args, ...extra } as never, {
        allowInputRequired: true,
      }) as Promise<
        CallToolResult & {
          resultType?: string;
          requestState?: string;
          inputRequests?: Record<string, { params?: { url?: string } }>;
        }
      >;
    const first = await call();
    expect(first.resultType).toBe('input_required');
    expect(Object.keys(first.inputRequests ?? {})).toEqual(['ask-1:child']);
    const windowUrl = first.inputRequests?.['ask-1:child']?.params?.url ?? '';
    const requestId = new URL(windowUrl).searchParams.get('request') ?? '';
    const opened = { inputResponses: { 'ask-1:child': { action: 'accept' } }, requestState: first.requestState };
    const state = first.requestState ?? '';
    const flipped = `${state.slice(0, -2)}${state.at(-2) === 'A' ? 'B' : 'A'}${state.at(-1)}`;
    await expect(call({ ...opened, requestState: flipped })).rejects.toThrow(/Invalid or expired requestState/);
    expect(await household.runtime.identity.callApprovals.decline({ requestId, role: 'child' })).toMatchObject({
      ok: true,
    });
    const declined = await call(opened);
    expect(textOf(declined)).toBe('Refused: the child declined the call. Nothing was sent.');
    expect(declined.structuredContent).toEqual({
      requestId,
      status: 'declined',
      reason: 'the child declined the call',
    });
    // Nothing reached the shop.
    expect(await stillOpen(args)).toBe(true);
  });

  it('a 2025-11-25 session that declared URL elicitation gets it in URL mode, completion once the child approved, then the cancel', async () => {
    const args = { invoiceId: await order(), reason: 'asked the 2025 way' };
    const { http, asked, completed } = await opening(false, args);
    const cancelled = await cancel(args, http);
    expect(cancelled.isError, textOf(cancelled)).toBeFalsy();
    expect(cancelled.structuredContent).toMatchObject({ invoiceId: args.invoiceId, cancelled: true });
    expect(asked).toHaveLength(1);
    expect(asked[0]?.url).toMatch(new RegExp(`^${origin}/approve\\?as=child&request=`));
    expect(completed).toEqual([asked[0]?.elicitationId]);
  });
});
