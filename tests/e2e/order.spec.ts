import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from './support/app-server';
import { approve, enrol } from './support/approval-windows';
import { type E2eBrowser, launchBrowser, screenshot, seriousViolations } from './support/browser';

// SPEC §9 in a real browser: the production build, the offline planner, the chat in one browser,
// the child's and the parent's approval windows in two others, each with its own CDP virtual
// authenticator; enrolment with the codes the server printed.
let app: AppServer;
const browsers: E2eBrowser[] = [];
let chat: Page;
let child: Page;
let parent: Page;

async function order(text: string): Promise<void> {
  await chat.getByLabel('Message').fill(text);
  await chat.getByLabel('Message').press('Enter');
}

beforeAll(async () => {
  app = await startAppServer();
  for (let index = 0; index < 3; index++) browsers.push(await launchBrowser());
  const [chatBrowser, childBrowser, parentBrowser] = browsers as [E2eBrowser, E2eBrowser, E2eBrowser];
  chat = await chatBrowser.page();
  child = await childBrowser.page();
  parent = await parentBrowser.page();
  await enrol(child, app, 'child');
  await enrol(parent, app, 'parent');
  await chat.goto(app.origin);
});

afterAll(async () => {
  for (const browser of browsers) await browser.close();
  await app?.close();
});

describe('the Order Pizza flow in Chromium', () => {
  it('every page is accessible: no serious or critical axe violation', async () => {
    for (const page of [chat, child, parent]) {
      expect(await seriousViolations(page), page.url()).toEqual([]);
    }
  });

  it('the message box is read-only until the session is live, so nothing typed before the page hydrates is lost', async () => {
    const served = await (await fetch(app.origin)).text();
    expect(served).toMatch(/<textarea[^>]*id="chat-input"[^>]*readonly/i);
    // Once the session is live, it is editable.
    await chat.locator('#chat-input:not([readonly])').waitFor();
    expect(await chat.getByLabel('Message').isEditable()).toBe(true);
  });

  it('the chat says how tool search ranks (keyword search while the model warms up)', async () => {
    await chat
      .getByRole('status')
      .filter({ hasText: /search/i })
      .first()
      .waitFor();
  });

  it('a cheese slice to 12 Main St: the child approves and the order completes with an ETA', async () => {
    await order('a cheese slice to 12 Main St');
    await chat
      .getByRole('article', { name: /Order from Main Street Pizza/ })
      .last()
      .waitFor();
    await screenshot(chat, 'chat-mid-order');
    await child.getByRole('button', { name: 'Approve with passkey' }).waitFor();
    await screenshot(child, 'child-window-pending');
    expect(await seriousViolations(child)).toEqual([]);
    await approve(child);
    await chat
      .getByRole('article', { name: 'Receipt' })
      .last()
      .getByText(/30 minutes/)
      .waitFor();
    await screenshot(chat, 'chat-order-complete');
    // Approved here and settled: the card leaves, never to say it was declined or expired.
    await child.getByRole('article', { name: /Order from Main Street Pizza/ }).waitFor({ state: 'detached' });
  });

  it('a large pepperoni: the child alone is not enough; after both approve it completes by itself', async () => {
    await order('a large pepperoni to 12 Main St');
    await child.getByRole('button', { name: 'Approve with passkey' }).waitFor();
    await approve(child);
    await parent.getByRole('button', { name: 'Approve with passkey' }).waitFor();
    await screenshot(parent, 'parent-window-pending');
    expect(await chat.getByRole('article', { name: 'Receipt' }).count()).toBe(1);
    await approve(parent);
    await chat
      .getByRole('article', { name: 'Receipt' })
      .nth(1)
      .getByText(/30 minutes/)
      .waitFor();
  });

  it('twenty large supremes are refused with the reason, and nothing is charged', async () => {
    await order('twenty large supremes to 12 Main St');
    await chat
      .getByText(/over the household's limit of \$200\.00/)
      .last()
      .waitFor();
    expect(await chat.getByRole('article', { name: 'Receipt' }).count()).toBe(2);
  });
});
