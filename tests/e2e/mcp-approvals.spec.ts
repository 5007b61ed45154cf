import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type CallToolResult,
  Client,
  type ElicitRequestURLParams,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Caller, orderTools } from '../support/order-tools';
import { type AppServer, startAppServer } from './support/app-server';
import { enrol } from './support/approval-windows';
import { type E2eBrowser, launchBrowser, screenshot } from './support/browser';

// Issue 29, approvals for external clients (SPEC §5.4, §8): over /mcp, request_approval asks the
// protocol's way. A v2 SDK client pinned to 2026-07-28 gets input_required with a URL elicitation
// per approval window, the household approves in Chromium with passkeys, and the client's own
// retry completes with the evidence to pay with. A tampered or foreign request state is refused; a
// retry after a decline or after the invoice expired gets the reason and nothing can be charged. A
// v1 client speaking 2025-11-25 with URL elicitation completes the same order over its session.
// The shop served transparently at /mcp/pizza waits for the child's passkey over a cancel the same way.
const token = 'e2e-mcp-approvals-token-0123456789';
const clockFolder = mkdtempSync(join(tmpdir(), 'e2e-clock-'));
const clockFile = join(clockFolder, 'offset-ms');
let app: AppServer;
const browsers: E2eBrowser[] = [];
let child: Page;
let parent: Page;
const windows = () => ({ child, parent });

beforeAll(async () => {
  writeFileSync(clockFile, '0');
  app = await startAppServer({ EXTENSIBLE_MCP_TEST_CLOCK_FILE: clockFile, EXTENSIBLE_MCP_HTTP_TOKEN: token });
  for (let index = 0; index < 2; index++) browsers.push(await launchBrowser());
  const [childBrowser, parentBrowser] = browsers as [E2eBrowser, E2eBrowser];
  child = await childBrowser.page();
  parent = await parentBrowser.page();
  await enrol(child, app, 'child');
  await enrol(parent, app, 'parent');
});

afterAll(async () => {
  for (const browser of browsers) await browser.close();
  await app?.close();
  rmSync(clockFolder, { recursive: true, force: true });
});

/** The URL elicitations a client was sent, and a promise for the first `count` of them. */
function urlInbox(count: number) {
  const urls: string[] = [];
  let arrived: (urls: string[]) => void = () => {};
  const first = new Promise<string[]>((resolve) => {
    arrived = resolve;
  });
  return {
    urls,
    first,
    take(params: { mode?: unknown; url?: unknown }): void {
      expect(params.mode).toBe('url');
      urls.push(String(params.url));
      if (urls.length === count) arrived(urls.slice());
    },
  };
}

/** What a step of the order answered: its JSON, or the refusal text. */
function jsonOf(result: CallToolResult): Record<string, unknown> {
  const text = result.content[0]?.type === 'text' ? result.content[0].text : '';
  expect(result.isError, text).toBeFalsy();
  return JSON.parse(text) as Record<string, unknown>;
}

function textOf(result: CallToolResult): string {
  return result.content[0]?.type === 'text' ? result.content[0].text : '';
}

/** A v2 client pinned to 2026-07-28 declaring URL elicitation (or, `urls: false`, forms only); its handler opens nothing, it records. */
async function modernClient(inbox: ReturnType<typeof urlInbox>, options: { manual?: boolean; urls?: boolean } = {}) {
  const client = new Client(
    { name: 'e2e-mcp-2026', version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      capabilities: { elicitation: options.urls === false ? { form: {} } : { url: {} } },
      ...(options.manual && { inputRequired: { autoFulfill: false } }),
    },
  );
  client.setRequestHandler('elicitation/create', (request) => {
    inbox.take(request.params as ElicitRequestURLParams);
    return { action: 'accept' };
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${app.origin}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  expect(client.getProtocolEra()).toBe('modern');
  const callTool: Caller = async (name, args) => (await client.callTool({ name, arguments: args })) as CallToolResult;
  return { client, callTool };
}

/** A member opens the URL the client was sent and approves (or declines) there with their passkey. */
async function decide(role: 'child' | 'parent', url: string, decision: 'approve' | 'decline'): Promise<void> {
  const page = windows()[role];
  await page.bringToFront();
  await page.goto(url);
  await page.getByText(`Signed in as ${role}`).waitFor();
  if (decision === 'approve') {
    await page.getByRole('button', { name: 'Approve with passkey' }).click();
    await page
      .getByText(/Approved ✓/)
      .first()
      .waitFor();
  } else {
    await page.getByRole('button', { name: 'Decline' }).click();
    await page.getByText('You declined this order. Nothing will be charged.').waitFor();
  }
}

/** The approval URL the client was sent for `role`. */
function urlFor(urls: readonly string[], role: 'child' | 'parent'): string {
  const url = urls.find((candidate) => candidate.includes(`/approve?as=${role}&`));
  expect(url, urls.join(' ')).toBeDefined();
  return url ?? '';
}

describe('household approvals for external MCP clients on /mcp', () => {
  it('a 2026-07-28 client is sent to both approval windows; after both passkeys its retry completes, and the $15 order is paid', async () => {
    const inbox = urlInbox(2);
    const { client, callTool } = await modernClient(inbox);
    try {
      const tools = await orderTools(callTool);
      const invoice = await tools.invoice('large-pepperoni');
      expect(invoice.totalCents).toBe(1500);
      const approval = tools.call('request_approval', { invoice: invoice.invoice });
      const urls = await inbox.first;
      expect(urls).toHaveLength(2);
      const requestId = new URL(urlFor(urls, 'child')).searchParams.get('request');
      expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
      expect(urls.sort()).toEqual(
        [
          `${app.origin}/approve?as=child&request=${requestId}`,
          `${app.origin}/approve?as=parent&request=${requestId}`,
        ].sort(),
      );
      await decide('child', urlFor(urls, 'child'), 'approve');
      await screenshot(child, 'mcp-approvals-child-approved');
      await decide('parent', urlFor(urls, 'parent'), 'approve');
      await screenshot(parent, 'mcp-approvals-parent-approved');
      const approved = jsonOf(await approval);
      expect(approved).toMatchObject({ status: 'approved', approvalId: requestId });
      expect(Object.keys(approved.evidence as object).sort()).toEqual(['childApproval', 'invoice', 'parentApproval']);
      const paid = jsonOf(await tools.pay(invoice, String(requestId)));
      expect(paid).toMatchObject({ status: 'succeeded', invoiceId: invoice.invoiceId, amountCents: 1500 });
      expect(String(paid.receipt)).toMatch(/^eyJ/);
    } finally {
      await client.close();
    }
  });

  it('a tampered or foreign request state is refused before anything runs; after the child declines, the retry gets the reason and nothing can be charged', async () => {
    const inbox = urlInbox(1);
    const { client, callTool } = await modernClient(inbox, { manual: true });
    try {
      const tools = await orderTools(callTool);
      const invoice = await tools.invoice('cheese-slice');
      const other = await tools.invoice('cheese-slice');
      const ask = (args: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
        client.callTool(
          { name: 'call_tool', arguments: { ...args, tool_name: 'request_approval' }, ...extra } as never,
          { allowInputRequired: true },
        ) as Promise<
          CallToolResult & { resultType?: string; requestState?: string; inputRequests?: Record<string, unknown> }
        >;
      const args = { arguments: { invoice: invoice.invoice }, handle: tools.handle };
      const first = await ask(args);
      expect(first.resultType).toBe('input_required');
      expect(Object.keys(first.inputRequests ?? {})).toEqual(['ask-1:child']);
      const state = first.requestState ?? '';
      const opened = { inputResponses: { 'ask-1:child': { action: 'accept' } } };
      // 1. One character of the state changed: the MAC fails, a protocol error, nothing runs.
      const flipped = `${state.slice(0, -2)}${state.at(-2) === 'A' ? 'B' : 'A'}${state.at(-1)}`;
      await expect(ask(args, { ...opened, requestState: flipped })).rejects.toThrow(/Invalid or expired requestState/);
      // 2. The untouched state presented with another invoice: another call's state, refused.
      const foreign = await ask({ ...args, arguments: { invoice: other.invoice } }, { ...opened, requestState: state });
      expect(textOf(foreign)).toMatch(/belongs to another request or another client; nothing was run/);
      // 3. The child declines in the window the URL names; the genuine retry gets the reason.
      const asked = first.inputRequests?.['ask-1:child'] as { params?: { url?: string } } | undefined;
      const url = asked?.params?.url ?? '';
      const requestId = new URL(url).searchParams.get('request') ?? '';
      await decide('child', url, 'decline');
      await screenshot(child, 'mcp-approvals-child-declined');
      const declined = await ask(args, { ...opened, requestState: state });
      expect(declined.isError).toBe(true);
      expect(textOf(declined)).toBe('Refused: the child declined the order. Nothing was charged.');
      expect(declined.structuredContent).toMatchObject({ status: 'declined', approvalId: requestId });
      // Nothing can be charged on the declined request.
      const charge = await tools.pay(invoice, requestId);
      expect(charge.isError).toBe(true);
      expect(textOf(charge)).toMatch(/is declined, not approved/);
    } finally {
      await client.close();
    }
  });

  it('a 2025-11-25 client that declared URL elicitation gets elicitation/create in URL mode, then completion, and pays the same $15 order', async () => {
    const inbox = urlInbox(2);
    const completed: string[] = [];
    const sent: string[] = [];
    const client = new V1Client(
      { name: 'e2e-mcp-2025', version: '1.0.0' },
      { capabilities: { elicitation: { url: {} } } },
    );
    client.setRequestHandler(ElicitRequestSchema, (request) => {
      inbox.take(request.params);
      if (request.params.mode === 'url') sent.push(request.params.elicitationId);
      return { action: 'accept' };
    });
    client.setNotificationHandler(ElicitationCompleteNotificationSchema, (notification) => {
      completed.push(notification.params.elicitationId);
    });
    await client.connect(
      new V1StreamableHTTPClientTransport(new URL(`${app.origin}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    try {
      const callTool: Caller = async (name, args) =>
        (await client.callTool({ name, arguments: args }, undefined, { timeout: 110_000 })) as CallToolResult;
      const tools = await orderTools(callTool);
      const invoice = await tools.invoice('large-pepperoni');
      const approval = tools.call('request_approval', { invoice: invoice.invoice });
      const urls = await inbox.first;
      await decide('child', urlFor(urls, 'child'), 'approve');
      await decide('parent', urlFor(urls, 'parent'), 'approve');
      const approved = jsonOf(await approval);
      expect(approved).toMatchObject({ status: 'approved' });
      expect(completed.sort()).toEqual(sent.sort());
      const paid = jsonOf(await tools.pay(invoice, String(approved.approvalId)));
      expect(paid).toMatchObject({ status: 'succeeded', amountCents: 1500 });
    } finally {
      await client.close();
    }
  });

  it('a gated cancel from a 2026-07-28 client: the child’s window opened from its URL shows that call only, the passkey approves it, and the client’s retry cancels the order', async () => {
    writeFileSync(clockFile, '0');
    // A payment also waits for the child, asked by a client that cannot open URLs (it gets pending).
    const formsOnly = await modernClient(urlInbox(1), { urls: false });
    const inbox = urlInbox(1);
    const { client, callTool } = await modernClient(inbox);
    try {
      const other = await orderTools(formsOnly.callTool);
      const waiting = jsonOf(
        await other.call('request_approval', { invoice: (await other.invoice('cheese-slice')).invoice }),
      );
      expect(waiting).toMatchObject({ status: 'pending' });
      const tools = await orderTools(callTool);
      const found = await callTool('search_tools', { query: 'cancel order', top_k: 10, handle: tools.handle });
      expect(JSON.stringify(found.structuredContent)).toContain('pizza__cancel_order');
      const invoice = await tools.invoice('cheese-slice');
      const cancelling = tools.call('pizza__cancel_order', { invoiceId: invoice.invoiceId });
      const [url] = await inbox.first;
      const requestId = new URL(url ?? '').searchParams.get('request');
      expect(url).toBe(`${app.origin}/approve?as=child&request=${requestId}`);
      await child.bringToFront();
      await child.goto(url ?? '');
      const card = child.getByRole('article', { name: 'Your agent asks to cancel an order' });
      await card.waitFor();
      await child.getByText('This window was opened for one request.').waitFor();
      // That call only: the payment waiting for the child is not on this page.
      expect(await child.getByRole('article').count()).toBe(1);
      expect(await card.locator('li').allTextContents()).toEqual([`invoiceId: ${invoice.invoiceId}`]);
      await screenshot(child, 'mcp-gated-call-window-for-one-request');
      await card.getByRole('button', { name: 'Approve with passkey' }).click();
      await child.getByText('Approved ✓ — the call will run once, exactly as shown.').waitFor();
      const cancelled = await cancelling;
      expect(cancelled.isError, textOf(cancelled)).toBeFalsy();
      expect(cancelled.structuredContent).toMatchObject({ invoiceId: invoice.invoiceId, cancelled: true });
      // An id that is not waiting for the child shows a clear message and no request at all.
      await child.goto(`${app.origin}/approve?as=child&request=no-such-request`);
      await child.getByText(/^This request is not waiting for the child\./).waitFor();
      expect(await child.getByRole('article').count()).toBe(0);
      await screenshot(child, 'mcp-window-unknown-request');
    } finally {
      await client.close();
      await formsOnly.client.close();
    }
  });

  it('the same cancel through /mcp/pizza (the shop, transparent): the child approves in the window the client was sent, and its retry cancels the order', async () => {
    writeFileSync(clockFile, '0');
    const inbox = urlInbox(1);
    const client = new Client(
      { name: 'e2e-shop-2026', version: '1.0.0' },
      {
        versionNegotiation: { mode: { pin: '2026-07-28' } },
        // Transparent mode's asks are forms first: a client that opens URLs declares both.
        capabilities: { elicitation: { form: {}, url: {} } },
      },
    );
    client.setRequestHandler('elicitation/create', (request) => {
      inbox.take(request.params as ElicitRequestURLParams);
      return { action: 'accept' };
    });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${app.origin}/mcp/pizza`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    try {
      // The shop's own names, no meta-tools.
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(['request_invoice', 'cancel_order']));
      expect(tools.map((tool) => tool.name)).not.toContain('call_tool');
      const { invoiceId } = jsonOf(
        (await client.callTool({
          name: 'request_invoice',
          arguments: { items: [{ sku: 'cheese-slice', qty: 1 }], deliverTo: '12 Main St' },
        })) as CallToolResult,
      );
      const cancelling = client.callTool({ name: 'cancel_order', arguments: { invoiceId } }) as Promise<CallToolResult>;
      const [url] = await inbox.first;
      const requestId = new URL(url ?? '').searchParams.get('request');
      expect(url).toBe(`${app.origin}/approve?as=child&request=${requestId}`);
      await child.bringToFront();
      await child.goto(url ?? '');
      const card = child.getByRole('article', { name: 'Your agent asks to cancel an order' });
      await card.waitFor();
      expect(await card.locator('li').allTextContents()).toEqual([`invoiceId: ${invoiceId}`]);
      await screenshot(child, 'mcp-pizza-cancel-window');
      await card.getByRole('button', { name: 'Approve with passkey' }).click();
      await child.getByText('Approved ✓ — the call will run once, exactly as shown.').waitFor();
      const cancelled = await cancelling;
      expect(cancelled.isError, textOf(cancelled)).toBeFalsy();
      expect(cancelled.structuredContent).toMatchObject({ invoiceId, cancelled: true });
      expect(inbox.urls).toHaveLength(1);
    } finally {
      await client.close();
    }
  });

  it('after the invoice expired, the retry is refused with the reason, and nothing can be charged', async () => {
    const inbox = urlInbox(1);
    const { client, callTool } = await modernClient(inbox);
    try {
      const tools = await orderTools(callTool);
      const invoice = await tools.invoice('cheese-slice');
      const approval = tools.call('request_approval', { invoice: invoice.invoice });
      const [url] = await inbox.first;
      // Six minutes later on the household's clock: the five-minute invoice has expired.
      writeFileSync(clockFile, String(6 * 60 * 1000));
      const expired = await approval;
      expect(expired.isError).toBe(true);
      expect(textOf(expired)).toMatch(
        /^Refused: the invoice expired before every approval was given.*Nothing was charged\.$/,
      );
      const requestId = new URL(url ?? '').searchParams.get('request') ?? '';
      expect(expired.structuredContent).toMatchObject({ status: 'expired', approvalId: requestId });
      const charge = await tools.pay(invoice, requestId);
      expect(charge.isError).toBe(true);
      expect(textOf(charge)).toMatch(/is expired, not approved/);
    } finally {
      await client.close();
    }
  });
});
