import { type CallToolResult, Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from '../e2e/support/app-server';
import { enrol } from '../e2e/support/approval-windows';
import { type E2eBrowser, launchBrowser, screenshot } from '../e2e/support/browser';

// Issue 29, "No argument may be hashed without being shown": the child's passkey signs the hash of
// a gated call's every argument, so the window must show every one of them, as the text the hash
// covers. An agent that hides part of an argument (a right-to-left override, a bell, a zero-width
// space, runs of spaces HTML would collapse, an argument nested in an object or one the shop does
// not even know) must find all of it on screen, in Chromium, before the passkey is asked for.
const token = 'e2e-gated-arguments-token-0123456789';
let app: AppServer;
let browser: E2eBrowser;
let child: Page;
let client: Client;
let handle: string | undefined;

beforeAll(async () => {
  app = await startAppServer({ EXTENSIBLE_MCP_HTTP_TOKEN: token });
  browser = await launchBrowser();
  child = await browser.page();
  await enrol(child, app, 'child');
  // A 2026-07-28 client that opens URLs and fulfils its rounds itself, so the test holds each state.
  client = new Client(
    { name: 'e2e-gated-arguments', version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      capabilities: { elicitation: { url: {} } },
      inputRequired: { autoFulfill: false },
    },
  );
  client.setRequestHandler('elicitation/create', () => ({ action: 'accept' }));
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${app.origin}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  for (const query of ['pizza invoice order', 'cancel order']) {
    const found = await client.callTool({
      name: 'search_tools',
      arguments: { query, top_k: 10, ...(handle !== undefined && { handle }) },
    });
    handle = (found.structuredContent as { handle?: string } | undefined)?.handle ?? handle;
  }
});

afterAll(async () => {
  await client?.close();
  await browser?.close();
  await app?.close();
});

type Round = CallToolResult & {
  resultType?: string;
  requestState?: string;
  inputRequests?: Record<string, { params?: { url?: string } }>;
};

/** `call_tool` through the client; with `retry`, the retry of an earlier round with its state. */
function call(tool: string, args: Record<string, unknown>, retry?: Round): Promise<Round> {
  return client.callTool(
    {
      name: 'call_tool',
      arguments: { tool_name: tool, arguments: args, ...(handle !== undefined && { handle }) },
      ...(retry !== undefined && {
        inputResponses: { 'ask-1:child': { action: 'accept' } },
        requestState: retry.requestState,
      }),
    } as never,
    { allowInputRequired: true },
  ) as Promise<Round>;
}

function textOf(result: CallToolResult): string {
  // An input_required round has no content.
  const [first] = result.content ?? [];
  return first?.type === 'text' ? first.text : '';
}

/** A fresh order at the shop: its invoice id. */
async function order(): Promise<string> {
  const issued = await call('pizza__request_invoice', {
    items: [{ sku: 'cheese-slice', qty: 1 }],
    deliverTo: '12 Main St',
  });
  expect(issued.isError, textOf(issued)).toBeFalsy();
  return String((JSON.parse(textOf(issued)) as { invoiceId: string }).invoiceId);
}

/** Asks for the gated cancel: the round with the child's window, and that window's card. */
async function ask(args: Record<string, unknown>): Promise<{ round: Round; card: Locator }> {
  const round = await call('pizza__cancel_order', args);
  expect(round.resultType, textOf(round)).toBe('input_required');
  const url = round.inputRequests?.['ask-1:child']?.params?.url ?? '';
  expect(url).toMatch(/\/approve\?as=child&request=/);
  await child.bringToFront();
  await child.goto(url);
  const card = child.getByRole('article', { name: 'Your agent asks to cancel an order' });
  await card.waitFor();
  await card.getByText('Requested by the agent:').waitFor();
  return { round, card };
}

/** Each argument line as Chromium lays it out for a person (innerText: after white-space rules). */
function shownLines(card: Locator): Promise<string[]> {
  // biome-ignore lint/performance/useDomNodeTextContent: the layout's text is the point (collapsed spaces)
  return card.locator('li').evaluateAll((items) => items.map((item) => (item as HTMLElement).innerText));
}

describe('a gated call’s approval window', () => {
  it('shows every argument the passkey signs, hidden characters as marked escapes and every space kept, and the call that runs is that one', async () => {
    const invoiceId = await order();
    // Exactly the shop's two arguments; the reason hides a reversal, a bell, a zero-width space and
    // a run of spaces.
    const reason = 'ordered\u202Etwice\u0007 by   mistake\u200B';
    const { round, card } = await ask({ invoiceId, reason });
    expect(await shownLines(card)).toEqual([
      `invoiceId: ${invoiceId}`,
      'reason: ordered\\u202Etwice\\u0007 by   mistake\\u200B',
    ]);
    // None of the hidden characters acts on the page; each is a marked escape the card explains.
    const rendered = await card.locator('ul').evaluate((list) => list.textContent ?? '');
    for (const hidden of ['\u202E', '\u0007', '\u200B']) expect(rendered).not.toContain(hidden);
    expect(await card.locator('[data-hidden-character]').evaluateAll((marks) => marks.length)).toBe(3);
    await card
      .getByRole('note')
      .getByText(/contains invisible or control characters/)
      .waitFor();
    await screenshot(child, 'gated-call-hidden-characters');
    await card.getByRole('button', { name: 'Approve with passkey' }).click();
    await child.getByText('Approved ✓ — the call will run once, exactly as shown.').waitFor();
    const cancelled = await call('pizza__cancel_order', { invoiceId, reason }, round);
    expect(cancelled.isError, textOf(cancelled)).toBeFalsy();
    expect(cancelled.structuredContent).toMatchObject({ invoiceId, cancelled: true });
  });

  it('shows an argument the tool does not declare, an object’s nested keys and a long value whole; declined, nothing runs', async () => {
    const invoiceId = await order();
    const note = { 'gift\u200Bcard': ['x', 1], urgent: true };
    // One word of 300 characters: nowhere to break a line.
    const long = `IBAN${'0123456789'.repeat(29)}XY`;
    const { round, card } = await ask({ invoiceId, note, reason: long });
    expect(await shownLines(card)).toEqual([
      `invoiceId: ${invoiceId}`,
      'note: {"gift\\u200Bcard":["x",1],"urgent":true}',
      `reason: ${long}`,
    ]);
    // The long value wraps inside the card instead of running past its edge, where nobody reads it.
    const overflow = await card
      .locator('li')
      .evaluateAll((items) => items.map((item) => item.scrollWidth - item.clientWidth));
    expect(overflow).toEqual([0, 0, 0]);
    await screenshot(child, 'gated-call-every-argument');
    await card.getByRole('button', { name: 'Decline' }).click();
    await child.getByText('Declined. The call will not run.').waitFor();
    const declined = await call('pizza__cancel_order', { invoiceId, note, reason: long }, round);
    expect(textOf(declined)).toBe('Refused: the child declined the call. Nothing was sent.');
  });
});
