import {
  type CallToolResult,
  Client,
  type ElicitRequestURLParams,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import pg from 'pg';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orderTools } from '../support/order-tools';
import { createTestDatabase } from '../support/postgres';
import { type AppServer, startAppServer } from './support/app-server';
import { approve, enrol } from './support/approval-windows';
import { type E2eBrowser, launchBrowser, screenshot } from './support/browser';
import { type SteeringProxy, startSteeringProxy } from './support/steering-proxy';

// Issue 28, SPEC §11: two `next start` processes of one household on one PostgreSQL database,
// behind one loopback origin (a reverse proxy that keeps `Host`, steered by a cookie so the test
// decides who serves what). They share the data folder's key file (the sealing key, never in the
// database). The chat talks to instance A, the child's window is served by B and the parent's by
// A; the child approves last, on B, and the turn A runs resumes by itself. `/log` on B shows A's
// decisions live. Then the chat's next message goes to B while its page still streams from A:
// B's turn reaches the page live. Last, money under concurrency: an order a 2026 MCP client had
// approved is charged 50 times at once, half through each process, and the rail sees one charge.
const token = 'e2e-two-instances-token-0123456789';
let databaseUrl: string;
let a: AppServer;
let b: AppServer;
let proxy: SteeringProxy;
let origin: string;
const browsers: E2eBrowser[] = [];
let chatBrowser: E2eBrowser;
let chat: Page;
let child: Page;
let parent: Page;
let log: Page;

/** A browser whose every request the proxy sends to `instance`. */
async function browserOn(instance: 'a' | 'b'): Promise<E2eBrowser> {
  const browser = await launchBrowser();
  browsers.push(browser);
  await browser.context.addCookies([{ name: 'instance', value: instance, url: origin }]);
  return browser;
}

/** The instances that served requests whose path starts with `prefix`. */
const servedBy = (prefix: string) =>
  new Set(
    proxy
      .forwarded()
      .filter((request) => request.url.startsWith(prefix))
      .map((request) => request.instance),
  );

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  proxy = await startSteeringProxy({ a: () => a.port, b: () => b.port });
  origin = `http://localhost:${proxy.port}`;
  const environment = { DATABASE_URL: databaseUrl, EXTENSIBLE_MCP_ORIGIN: origin, EXTENSIBLE_MCP_HTTP_TOKEN: token };
  a = await startAppServer(environment);
  // The second instance finds the household and its live codes in the database: it prints none.
  b = await startAppServer(environment, undefined, { dataDir: a.dataDir, codes: false });
  expect(b.output()).not.toMatch(/Enrollment code for (child|parent): (child|parent)-/);

  chatBrowser = await browserOn('a');
  const childBrowser = await browserOn('b');
  const parentBrowser = await browserOn('a');
  child = await childBrowser.page();
  parent = await parentBrowser.page();
  // The child enrols through B with a code A printed.
  await enrol(child, { origin, codes: a.codes }, 'child');
  await enrol(parent, { origin, codes: a.codes }, 'parent');
  log = await childBrowser.page();
  await log.goto(`${origin}/log`);
  await log.locator('[data-connection="live"]').waitFor();
  chat = await chatBrowser.page();
  await chat.goto(origin);
}, 300_000);

/** A 2026-07-28 client of `/mcp` on `instance` (steered by its cookie), with the three tools of an order found; URL asks go to `asked`. */
async function orderClientOn(instance: 'a' | 'b', asked: (url: string) => void = () => {}) {
  const client = new Client(
    { name: `e2e-two-instances-${instance}`, version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: { elicitation: { url: {} } } },
  );
  client.setRequestHandler('elicitation/create', (request) => {
    asked(String((request.params as ElicitRequestURLParams).url));
    return { action: 'accept' };
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${origin}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}`, cookie: `instance=${instance}` } },
    }),
  );
  const tools = await orderTools(
    async (name, args) => (await client.callTool({ name, arguments: args })) as CallToolResult,
  );
  return { client, ...tools };
}

const textOf = (result: CallToolResult) => (result.content[0]?.type === 'text' ? result.content[0].text : '');

/** One number the database answers, read as an operator would. */
async function scalar(sql: string, values: unknown[]): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return Number(Object.values((await client.query(sql, values)).rows[0] ?? {})[0]);
  } finally {
    await client.end();
  }
}

afterAll(async () => {
  for (const browser of browsers) await browser.close();
  await b?.stop();
  await a?.close();
  await proxy?.close();
});

describe('two app instances on one PostgreSQL database behind one origin, in Chromium', () => {
  it('a $15 order: the chat on A, the child on B, the parent on A; it resumes by itself after B took the last approval', async () => {
    await chat.locator('#chat-input:not([readonly])').waitFor();
    await chat.getByLabel('Message').fill('a large pepperoni to 12 Main St');
    await chat.getByLabel('Message').press('Enter');
    await chat
      .getByRole('article', { name: /Order from Main Street Pizza/ })
      .last()
      .waitFor();
    // The parent first, on A; then the child, on B: the decision the waiting turn needs is B's.
    await parent.getByRole('button', { name: 'Approve with passkey' }).waitFor();
    await approve(parent);
    await child.getByRole('button', { name: 'Approve with passkey' }).waitFor();
    await screenshot(child, 'two-instances-child-on-b');
    await approve(child);
    await chat
      .getByRole('article', { name: 'Receipt' })
      .last()
      .getByText(/30 minutes/)
      .waitFor({ timeout: 60_000 });
    await screenshot(chat, 'two-instances-chat-on-a');

    // Who served what: the test's steering held.
    expect(servedBy('/api/chat/')).toEqual(new Set(['a']));
    expect(servedBy('/api/identity/approval/verify')).toEqual(new Set(['a', 'b']));
    expect(servedBy('/api/log/stream')).toEqual(new Set(['b']));
  });

  it("/log opened on B shows A's decisions live: the parent's approval and the order's fulfilment", async () => {
    await log.locator('tr[data-event-id]', { hasText: 'the parent approved with a passkey' }).waitFor();
    await log.locator('tr[data-event-id]', { hasText: 'approval-fulfilled' }).waitFor({ timeout: 60_000 });
    await log.locator('tr[data-event-id]', { hasText: 'receipt-issued' }).first().waitFor();
    await screenshot(log, 'two-instances-log-on-b');
    // The page streamed them: it never reloaded, and its one stream is B's.
    expect(proxy.forwarded().filter((request) => request.url === '/log')).toHaveLength(1);
  });

  it('a message the chat sends through B is answered live on the page still streaming from A', async () => {
    await chat.getByText('The agent is working…').waitFor({ state: 'detached', timeout: 60_000 });
    const streams = proxy.forwarded().filter((request) => request.url.startsWith('/api/chat/events')).length;
    // From now on every request of the chat's browser goes to B; its open event stream stays on A.
    await chatBrowser.context.addCookies([{ name: 'instance', value: 'b', url: origin }]);
    await chat.getByLabel('Message').fill('the menu please');
    await chat.getByLabel('Message').press('Enter');
    await chat
      .getByText(/Here is the menu/)
      .last()
      .waitFor({ timeout: 60_000 });
    await screenshot(chat, 'two-instances-chat-answered-by-b');
    const messages = proxy.forwarded().filter((request) => request.url.startsWith('/api/chat/messages'));
    expect(messages.at(-1)?.instance).toBe('b');
    // The page never opened another stream: B's events reached it through A's.
    expect(proxy.forwarded().filter((request) => request.url.startsWith('/api/chat/events'))).toHaveLength(streams);
    expect(servedBy('/api/chat/events')).toEqual(new Set(['a']));
  });

  it('50 charges of one approved order at once, half through each process: one charge on the rail, one receipt; a second approval is refused on either', async () => {
    const asked: string[] = [];
    const onA = await orderClientOn('a', (url) => asked.push(url));
    const onB = await orderClientOn('b');
    try {
      const issued = await onA.invoice('large-pepperoni');
      expect(issued.totalCents).toBe(1500);
      // The client is sent both approval windows; the parent approves on A, the child on B.
      const approval = onA.call('request_approval', { invoice: issued.invoice });
      await expect.poll(() => asked.length, { timeout: 30_000 }).toBe(2);
      const requestId = new URL(asked[0] ?? '').searchParams.get('request') ?? '';
      for (const [page, role] of [
        [parent, 'parent'],
        [child, 'child'],
      ] as const) {
        await page.goto(asked.find((url) => url.includes(`as=${role}&`)) ?? '');
        await approve(page);
      }
      expect(JSON.parse(textOf(await approval))).toMatchObject({ status: 'approved', approvalId: requestId });

      const results = await Promise.all(
        Array.from({ length: 50 }, (_, index) => (index % 2 === 0 ? onA : onB).pay(issued, requestId)),
      );
      const receipts = new Set<string>();
      const refusals = new Set<string>();
      for (const result of results) {
        const text = textOf(result);
        if (result.isError) refusals.add(text.replace(/[0-9a-f-]{36}/g, '…'));
        else receipts.add(String(JSON.parse(text).receipt));
      }
      expect(receipts.size, [...refusals].join('\n')).toBe(1);
      // The others were told the one charge is under way, never that the evidence could not be held.
      for (const refusal of refusals) expect(refusal).toMatch(/^payment_in_progress: /);
      const charges = 'SELECT count(*) FROM mock_rail_charges WHERE invoice_id = $1';
      expect(await scalar(charges, [issued.invoiceId])).toBe(1);
      const paid =
        "SELECT count(*) FROM payments WHERE invoice_id = $1 AND state = 'succeeded' AND receipt IS NOT NULL";
      expect(await scalar(paid, [issued.invoiceId])).toBe(1);

      // A second approval of the paid order, asked of either process by either member, is refused.
      for (const [page, role] of [
        [child, 'child'],
        [parent, 'parent'],
      ] as const) {
        for (const instance of ['a', 'b']) {
          await page.context().addCookies([{ name: 'instance', value: instance, url: origin }]);
          const answer = await page.request.post(`${origin}/api/identity/approval/options?as=${role}`, {
            headers: { origin },
            data: { approvalId: requestId },
          });
          expect(answer.status(), `${role} on ${instance}`).toBe(409);
          expect(await answer.text()).toMatch(/not pending/);
        }
      }
    } finally {
      await onA.client.close();
      await onB.client.close();
    }
  });
});
