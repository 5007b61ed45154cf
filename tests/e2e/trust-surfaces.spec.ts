import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeFileName } from '../../lib/index';
import {
  createDeterministicClerk,
  createShop,
  createShopServer,
  didDocument,
  loadOrCreateMerchantKey,
  MENU,
  openOrderStore,
  type RunningHttpServer,
  startHttpServer,
} from '../../shop-agent/index';
import { type AppServer, freePort, startAppServer } from './support/app-server';
import { approve, enrol } from './support/approval-windows';
import { type E2eBrowser, launchBrowser, screenshot, seriousViolations } from './support/browser';
import { startTcpRelay, type TcpRelay } from './support/tcp-relay';

// SPEC §8 trust surfaces in Chromium, against a hostile shop (markup in its name, its menu and the
// address): the live log receives an order's decisions live, in order, once each, across a dropped
// connection; the audit page re-verifies every signature and shows a tampered receipt as failed;
// no markup runs anywhere; and no secret appears in any event, log line or byte the app sent.
const merchantName = `Main Street <img src=x onerror="window.__xss='merchant'"> Pizza`;
const itemName = `Large pepperoni <script>window.__xss='item'</script>`;
const address = `12 Main St <img src=x onerror="window.__xss='address'">`;
const mcpToken = 'mcp-token-9f1c2e7ab34d4c0f8e6d';

let app: AppServer;
let relay: TcpRelay;
let shop: RunningHttpServer;
let shopData: string;
let origin: string;
const browsers: E2eBrowser[] = [];
let chat: Page;
let child: Page;
let parent: Page;
let log: Page;
let invoiceId: string;

/** The event ids the log page shows, top to bottom. */
async function logIds(): Promise<number[]> {
  return (
    await log.locator('tr[data-event-id]').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-event-id')))
  ).map(Number);
}

/** No injected markup ran on the page: the payloads would have set `window.__xss`. */
async function expectNoScriptRan(page: Page): Promise<void> {
  expect(await page.evaluate(() => (window as unknown as { __xss?: string }).__xss), page.url()).toBeUndefined();
}

beforeAll(async () => {
  shopData = await mkdtemp(join(tmpdir(), 'e2e-hostile-shop-'));
  const shopPort = await freePort();
  let appPort = 0;
  relay = await startTcpRelay(() => appPort);
  origin = `http://localhost:${relay.port}`;
  const settlementFile = join(shopData, 'settlement-did');
  // The browser reaches the app only through the relay, so the app's origin is the relay's.
  app = await startAppServer({
    EXTENSIBLE_MCP_ORIGIN: origin,
    PIZZA_URL: `http://localhost:${shopPort}/mcp`,
    EXTENSIBLE_MCP_SETTLEMENT_DID_FILE: settlementFile,
    EXTENSIBLE_MCP_HTTP_TOKEN: mcpToken,
  });
  appPort = Number(new URL(app.origin).port);
  // The hostile shop starts once the household has published its settlement DID (as in docker).
  const key = await loadOrCreateMerchantKey(shopData);
  const orders = openOrderStore(join(shopData, 'orders.sqlite'));
  const hostileShop = createShop({
    key,
    orders,
    clerk: createDeterministicClerk(),
    merchantName,
    settlementDid: (await readFile(settlementFile, 'utf8')).trim(),
    menu: MENU.map((item) => (item.sku === 'large-pepperoni' ? { ...item, name: itemName } : item)),
  });
  shop = await startHttpServer({
    createMcpServer: () => createShopServer({ shop: hostileShop }),
    didDocument: didDocument(key),
    host: '127.0.0.1',
    port: shopPort,
  });
  for (let index = 0; index < 3; index++) browsers.push(await launchBrowser());
  const [windows, chatBrowser, logBrowser] = browsers as [E2eBrowser, E2eBrowser, E2eBrowser];
  child = await windows.page();
  parent = await windows.page();
  await enrol(child, { origin, codes: app.codes }, 'child');
  await enrol(parent, { origin, codes: app.codes }, 'parent');
  log = await logBrowser.page();
  await log.goto(`${origin}/log`);
  // The household pins the shop as soon as it answers: the log shows it.
  await log.locator('tr[data-event-id]', { hasText: 'merchant-pinned' }).waitFor({ timeout: 60_000 });
  chat = await chatBrowser.page();
  await chat.goto(origin);
}, 240_000);

afterAll(async () => {
  for (const browser of browsers) await browser.close();
  await shop?.close();
  await app?.close();
  await relay?.close();
  if (shopData) await rm(shopData, { recursive: true, force: true });
});

describe('trust surfaces in Chromium', () => {
  it("the live log shows a $15 order's decisions live, in order, once each, across a dropped connection", async () => {
    const firstId = (await logIds()).at(-1) ?? 0;
    await chat.getByLabel('Message').fill(`a large pepperoni to ${address}`);
    await chat.getByLabel('Message').press('Enter');
    // The approval window shows the hostile terms as the text they are.
    await child.bringToFront();
    await child.getByText(itemName).first().waitFor();
    await child.getByText(address, { exact: false }).first().waitFor();
    await expectNoScriptRan(child);
    await approve(child);
    await log.locator('tr[data-event-id]', { hasText: 'the child approved with a passkey' }).waitFor();
    await screenshot(log, 'log-mid-order');

    // The network drops every connection; the pages reconnect by themselves.
    relay.dropAll();
    await log.locator('[data-connection="live"]').waitFor();
    await approve(parent);
    const fulfilled = log.locator('tr[data-event-id]', { hasText: 'approval-fulfilled' });
    await fulfilled.waitFor({ timeout: 60_000 });
    invoiceId = (await fulfilled.locator('td').nth(5).locator('button').getAttribute('title'))?.split(' ')[0] ?? '';
    expect(invoiceId).toMatch(/^urn:uuid:/);

    // The reconnect named the last row it had, and every row since the order began arrived once, in order.
    expect(relay.requestHeads().some((head) => /GET \/api\/log\/stream[\s\S]*last-event-id: \d+/i.test(head))).toBe(
      true,
    );
    const ids = await logIds();
    expect(ids).toEqual(Array.from({ length: ids.length }, (_, index) => (ids[0] ?? 0) + index));
    expect(ids[0]).toBeLessThanOrEqual(firstId);
    const orderKinds = await log
      .locator('tr[data-event-id]')
      .filter({ has: log.locator(`button[title^="${invoiceId} "]`) })
      .locator('td:nth-child(3)')
      .allTextContents();
    expect(orderKinds).toEqual([
      'approval-created',
      'approval-approved',
      'approval-approved',
      'policy-decision',
      'evidence-held',
      'charge-started',
      'approval-settled',
      'receipt-issued',
      'evidence-spent',
      'approval-fulfilled',
    ]);
    await screenshot(log, 'log-after-order');
  });

  it('a refused move stands out, and the log filters by outcome and by order', async () => {
    await chat.bringToFront();
    await chat.getByLabel('Message').fill('/attack call-without-search');
    await chat.getByLabel('Message').press('Enter');
    const denial = log.locator('tr[data-outcome="deny"]', { hasText: 'discoveryGate' }).last();
    await denial.waitFor();
    await screenshot(log, 'log-denial');
    await log.getByLabel('Outcome').selectOption('deny');
    await log.locator('tr[data-event-id]', { hasText: 'discoveryGate' }).first().waitFor();
    expect(await log.locator('tr[data-event-id]:not([data-outcome="deny"])').count()).toBe(0);
    expect(new URL(log.url()).searchParams.get('outcome')).toBe('deny');

    await log.goto(`${origin}/log?order=${encodeURIComponent(invoiceId)}`);
    await log.locator('tr[data-event-id]', { hasText: 'approval-fulfilled' }).waitFor();
    const orders = await log
      .locator('tr[data-event-id] td:nth-child(6) button')
      .evaluateAll((buttons) => buttons.map((button) => button.getAttribute('title')?.split(' ')[0]));
    expect(new Set(orders)).toEqual(new Set([invoiceId]));
    expect(await seriousViolations(log)).toEqual([]);
  });

  it('the audit page lists the order and shows every signature of its chain verified', async () => {
    await log.goto(`${origin}/audit`);
    await log.locator(`tr[data-order="${invoiceId}"]`).getByRole('link').click();
    await log.locator('[data-chain="verified"]').waitFor();
    const steps = await log
      .locator('li[data-step]')
      .evaluateAll((items) =>
        items.map((item) => `${item.getAttribute('data-step')}:${item.getAttribute('data-verified')}`),
      );
    expect(steps).toEqual(['terms:yes', 'approval:yes', 'approval:yes', 'receipt:yes', 'commitment:yes']);
    await log.getByText('$15.00').first().waitFor();
    expect(await seriousViolations(log)).toEqual([]);
    await screenshot(log, 'audit-order-verified');
  });

  it('a stored receipt edited behind the household shows as failed', async () => {
    const database = new Database(join(app.dataDir, storeFileName));
    try {
      const { receipt } = database.prepare('SELECT receipt FROM approvals WHERE invoice_id = ?').get(invoiceId) as {
        receipt: string;
      };
      const [header, payload, signature] = receipt.split('.') as [string, string, string];
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      claims.vc.credentialSubject.amountCents = 1;
      const tampered = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${signature}`;
      database.prepare('UPDATE approvals SET receipt = ? WHERE invoice_id = ?').run(tampered, invoiceId);
    } finally {
      database.close();
    }
    await log.reload();
    await log.locator('[data-chain="failed"]').waitFor();
    expect(await log.locator('li[data-step="receipt"]').getAttribute('data-verified')).toBe('no');
    expect(await log.locator('li[data-step="terms"]').getAttribute('data-verified')).toBe('yes');
    await screenshot(log, 'audit-receipt-tampered');
  });

  it('markup in the merchant name, an item name and the address is shown as text on every page, never run', async () => {
    await chat.bringToFront();
    await chat.getByText(itemName).first().waitFor();
    await child.bringToFront();
    await child.goto(`${origin}/approve?as=child`);
    await log.goto(`${origin}/log`);
    await log.getByText(`pinned ${merchantName}`, { exact: false }).first().waitFor();
    await log.goto(`${origin}/audit`);
    await log.getByText(merchantName).first().waitFor();
    await log.goto(`${origin}/audit/${encodeURIComponent(invoiceId)}`);
    await log.getByText(address, { exact: false }).first().waitFor();
    for (const page of [chat, child, parent, log]) await expectNoScriptRan(page);
  });

  it('no token, private key, enrollment code or Stripe key in any event, log line or byte the app sent', async () => {
    const database = new Database(join(app.dataDir, storeFileName), { readonly: true });
    const events = (database.prepare('SELECT * FROM audit_log').all() as unknown[]).map((row) => JSON.stringify(row));
    database.close();
    const cookies = (await Promise.all(browsers.map((browser) => browser.context.cookies()))).flat();
    const householdKey = readFileSync(join(app.dataDir, 'household.key'));
    const merchantKey = JSON.parse(readFileSync(join(shopData, 'merchant-key.json'), 'utf8')) as { d?: string };
    const secrets = [
      mcpToken,
      ...Object.values(app.codes),
      ...cookies.map((cookie) => cookie.value),
      householdKey.toString('base64'),
      householdKey.toString('base64url'),
      householdKey.toString('hex'),
      String(merchantKey.d),
    ].filter((secret) => secret.length >= 12);
    expect(secrets.length).toBeGreaterThanOrEqual(6);
    // What the app sent, minus the Set-Cookie headers that hand each browser its own cookie.
    const sent = relay.responses().replace(/^set-cookie:.*$/gim, '');
    // The start banner is the one place enrollment codes go by design (SPEC §5.3): the terminal.
    const serverLog = app.output().replace(/^ *Enrollment code for (child|parent): .*$/gm, '');
    // The proxy's own lines reach the terminal too, so they are scanned with the rest.
    expect(serverLog).toContain('proxy: pins: fixed ahead of first use: pizza');
    const haystacks = { events: events.join('\n'), serverLog, sent };
    expect(haystacks.events.length).toBeGreaterThan(1000);
    expect(haystacks.sent).toContain('data: ');
    for (const [where, text] of Object.entries(haystacks)) {
      for (const secret of secrets) expect(text.includes(secret), `${where} contains a secret`).toBe(false);
      expect(text, where).not.toMatch(/sk_(test|live)_[A-Za-z0-9]{8,}/);
    }
  });
});
