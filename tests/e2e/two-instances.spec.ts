import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
// B's turn reaches the page live.
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
  const url = await createTestDatabase();
  proxy = await startSteeringProxy({ a: () => a.port, b: () => b.port });
  origin = `http://localhost:${proxy.port}`;
  const environment = { DATABASE_URL: url, EXTENSIBLE_MCP_ORIGIN: origin };
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
});
