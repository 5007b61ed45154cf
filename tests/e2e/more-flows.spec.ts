import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from './support/app-server';
import { enrol } from './support/approval-windows';
import { type E2eBrowser, launchBrowser, screenshot } from './support/browser';

// More of SPEC §8–§9 in Chromium: both approval windows as two pages of ONE browser (one cookie
// jar, one virtual authenticator per page), the delivery address asked through an elicitation
// form and shown from the signed invoice, a decline, and two chats with separate sessions.
let app: AppServer;
const browsers: E2eBrowser[] = [];
let chat: Page;
let otherChat: Page;
let child: Page;
let parent: Page;

async function say(page: Page, text: string): Promise<void> {
  await page.getByLabel('Message').fill(text);
  await page.getByLabel('Message').press('Enter');
}

beforeAll(async () => {
  app = await startAppServer();
  for (let index = 0; index < 3; index++) browsers.push(await launchBrowser());
  const [windows, chatBrowser, otherBrowser] = browsers as [E2eBrowser, E2eBrowser, E2eBrowser];
  // The child's and the parent's windows side by side in one browser.
  child = await windows.page();
  parent = await windows.page();
  await enrol(child, app, 'child');
  await enrol(parent, app, 'parent');
  chat = await chatBrowser.page();
  await chat.goto(app.origin);
  otherChat = await otherBrowser.page();
  await otherChat.goto(app.origin);
});

afterAll(async () => {
  for (const browser of browsers) await browser.close();
  await app?.close();
});

describe('approval windows, elicitation, decline and sessions in Chromium', () => {
  it('both roles stay signed in side by side in one browser, each with its own passkey', async () => {
    await child.reload();
    await parent.reload();
    await child.getByText('Signed in as child').waitFor();
    await parent.getByText('Signed in as parent').waitFor();
  });

  it('a large pepperoni with no address: the chat asks in a form, and the signed invoice carries the answer', async () => {
    await say(chat, 'a large pepperoni');
    const form = chat.getByRole('form').filter({ hasText: 'The shop needs a detail' }).last();
    await form.waitFor();
    await screenshot(chat, 'chat-elicitation');
    await form.getByRole('textbox').first().fill('77 Elm Rd');
    await form.getByRole('button', { name: 'Submit' }).click();
    await chat
      .getByRole('article', { name: /Order from Main Street Pizza/ })
      .last()
      .getByText('77 Elm Rd')
      .waitFor();
    // The windows show the address from the merchant-signed invoice.
    await child.getByText('77 Elm Rd').waitFor();
    await parent.getByText('77 Elm Rd').waitFor();
  });

  it('the $15 order completes when both pages of the one browser approve', async () => {
    await child.bringToFront();
    await child.getByRole('button', { name: 'Approve with passkey' }).click();
    await child
      .getByText(/Approved ✓/)
      .first()
      .waitFor();
    await parent.bringToFront();
    await parent.getByRole('button', { name: 'Approve with passkey' }).click();
    await chat
      .getByRole('article', { name: 'Receipt' })
      .last()
      .getByText(/30 minutes/)
      .waitFor();
  });

  it('declining in the child window ends the order with a clear message', async () => {
    await say(chat, 'a cheese slice to 12 Main St');
    await child.getByRole('button', { name: 'Decline' }).click();
    await chat
      .getByText(/declined/i)
      .last()
      .waitFor();
    expect(await chat.getByRole('article', { name: 'Receipt' }).count()).toBe(1);
  });

  it('two chats are two sessions: a tool one discovered cannot be called from the other', async () => {
    await say(otherChat, '/attack call-without-search');
    await otherChat
      .getByText(/Refused: Tool "pizza__request_invoice" has not been discovered in this session/)
      .waitFor();
  });
});
