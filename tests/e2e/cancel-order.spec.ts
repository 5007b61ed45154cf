import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from './support/app-server';
import { approve, enrol } from './support/approval-windows';
import { type E2eBrowser, launchBrowser, screenshot, seriousViolations } from './support/browser';

// Issue 29 `approval_required` in a real browser: the offline planner asks to cancel the chat's
// order, the shop's cancel_order is held for the child's passkey over exactly that call, the
// child's window shows every argument the passkey signs, and the cancel runs once approved.
let app: AppServer;
const browsers: E2eBrowser[] = [];
let chat: Page;
let child: Page;

async function say(text: string): Promise<void> {
  await chat.getByLabel('Message').fill(text);
  await chat.getByLabel('Message').press('Enter');
}

beforeAll(async () => {
  app = await startAppServer();
  for (let index = 0; index < 2; index++) browsers.push(await launchBrowser());
  const [chatBrowser, childBrowser] = browsers as [E2eBrowser, E2eBrowser];
  chat = await chatBrowser.page();
  child = await childBrowser.page();
  await enrol(child, app, 'child');
  await chat.goto(app.origin);
  await chat.locator('#chat-input:not([readonly])').waitFor();
});

afterAll(async () => {
  for (const browser of browsers) await browser.close();
  await app?.close();
});

describe('cancelling an order needs the child’s passkey', () => {
  it('the child sees the exact call, approves it with the passkey, and the order is cancelled once', async () => {
    await say('a cheese slice to 12 Main St');
    await child.getByRole('button', { name: 'Approve with passkey' }).waitFor();
    await approve(child);
    await chat
      .getByRole('article', { name: 'Receipt' })
      .last()
      .getByText(/30 minutes/)
      .waitFor();

    await say('cancel my order');
    const card = child.getByRole('article', { name: 'Your agent asks to cancel an order' });
    await card.waitFor();
    expect(await card.getByRole('heading').textContent()).toBe(
      'Your agent asks to cancel an order at Main Street Pizza.',
    );
    await card.getByText('Requested by the agent:').waitFor();
    expect(await card.locator('li').allTextContents()).toEqual([expect.stringMatching(/^invoiceId: urn:uuid:/)]);
    expect(await seriousViolations(child)).toEqual([]);
    await screenshot(child, 'child-window-gated-call');
    await chat
      .getByText(/Cancelling needs the child's passkey/)
      .last()
      .waitFor();
    await approve(child);
    await child.getByText('Approved ✓ — the call will run once, exactly as shown.').waitFor();
    const answer = chat.getByText(/order (is|was not) cancelled/).last();
    await answer.waitFor();
    await screenshot(chat, 'chat-order-cancelled');
    expect(await answer.textContent()).toMatch(/^Agent: The order is cancelled\. The delivery is stopped\./);
  });
});
