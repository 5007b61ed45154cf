import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, root, startAppServer } from './support/app-server';
import { approve, enrol } from './support/approval-windows';
import { type E2eBrowser, launchBrowser, seriousViolations } from './support/browser';

// Issue 15's attack console in Chromium, on the production build with the offline planner: a real
// $15 order first (both passkeys, CDP virtual authenticators), then every button of "Try to break
// it". Each move runs through the real proxy in a fresh MCP session and must come back refused in
// the refuser's own words, with nothing charged (the chat still shows the one receipt).
let app: AppServer;
const browsers: E2eBrowser[] = [];
let chat: Page;
let child: Page;
let parent: Page;

/** Every button, with the refusal it must show (the proxy's, the policy's, the household's or the shop's words). */
const moves: ReadonlyArray<readonly [label: string, refusal: RegExp]> = [
  ['Call a tool without searching', /Refused: Tool "pizza__request_invoice" has not been discovered in this session/],
  [
    'Pay with no approval',
    /Refused: Refused by the family spending policy: the call is missing `childApproval` \(provided by the child's passkey\)/,
  ],
  ['Replay a spent approval', /Refused: This evidence has already been used for a different call/],
  ['Change the amount', /Refused: This evidence has already been used for a different call/],
  ["Reuse the parent's approval on a new invoice", /Refused: This evidence has already been used for a different call/],
  ['Child approves as the parent', /Refused: This evidence has already been used for a different call/],
  [
    'Order $300.00 of pizza',
    /Refused: The approval request was refused: \$300\.00 is over the household's limit of \$200\.00/,
  ],
  [
    'Talk the clerk into 90% off',
    /Refused: The order is outside the shop policy; no invoice was issued\.\s+- Item 1 \(large-pepperoni\): \$1\.50 is below the lowest price the shop signs, \$10\.50/,
  ],
  [
    'Load an attacker\'s server as "payments"',
    /Refused: The server name "payments" belongs to the operator's configuration and cannot be loaded at another address/,
  ],
  [
    'Call a look-alike tool name',
    /Refused: Tool "pizza__r\u0435quest_invoice" has not been discovered in this session/,
  ],
];

beforeAll(async () => {
  app = await startAppServer();
  for (let index = 0; index < 2; index++) browsers.push(await launchBrowser());
  const [windows, chatBrowser] = browsers as [E2eBrowser, E2eBrowser];
  child = await windows.page();
  parent = await windows.page();
  await enrol(child, app, 'child');
  await enrol(parent, app, 'parent');
  chat = await chatBrowser.page();
  await chat.goto(app.origin);
});

afterAll(async () => {
  for (const browser of browsers) await browser.close();
  await app?.close();
});

describe('the attack console in Chromium', () => {
  it('before any order, a move that needs a real approval says what to do first', async () => {
    await chat.getByText('Try to break it').click();
    await chat.getByRole('button', { name: 'Replay a spent approval' }).click();
    const card = chat.getByRole('region', { name: 'Attack: Replay a spent approval' }).last();
    await card.getByText(/Complete an order over \$10\.00 first/).waitFor();
    expect(await card.getAttribute('data-outcome')).toBe('needs-evidence');
    // Closed again by keyboard: the disclosure is a native <summary>.
    await chat.getByText('Try to break it').focus();
    await chat.keyboard.press('Enter');
  });

  it('a $15 order completes with both passkeys', async () => {
    await chat.bringToFront();
    await chat.getByLabel('Message').fill('a large pepperoni to 12 Main St');
    await chat.getByLabel('Message').press('Enter');
    await approve(child);
    await parent.getByRole('button', { name: 'Approve with passkey' }).waitFor();
    await approve(parent);
    await chat
      .getByRole('article', { name: 'Receipt' })
      .last()
      .getByText(/30 minutes/)
      .waitFor();
  });

  it('every button is refused with its reason, and nothing is charged', async () => {
    await chat.bringToFront();
    // Opened by keyboard: focus the control and press Enter.
    await chat.getByText('Try to break it').focus();
    await chat.keyboard.press('Enter');
    expect(await seriousViolations(chat)).toEqual([]);
    for (const [label, refusal] of moves) {
      const button = chat.getByRole('button', { name: label, exact: true });
      const cards = chat.getByRole('region', { name: `Attack: ${label}` });
      const earlier = await cards.count();
      // A button is disabled while a turn runs: the click waits for the previous move to end.
      await button.click();
      const card = cards.nth(earlier);
      await card.getByText(/Nothing was charged\./).waitFor();
      expect(await card.getAttribute('data-outcome'), label).toBe('refused');
      expect(await card.textContent(), label).toMatch(refusal);
    }
    // The one receipt is still the only one: no move paid for anything.
    expect(await chat.getByRole('article', { name: 'Receipt' }).count()).toBe(1);
    // The refused steps are also tool rows in the conversation.
    expect(
      await chat.getByText(/→ refused: Tool "pizza__request_invoice" has not been discovered/).count(),
    ).toBeGreaterThan(0);
    // A tall window, so the last refusals and the open console show together (the log scrolls inside the page).
    await chat.setViewportSize({ width: 1280, height: 1600 });
    await chat.getByRole('region', { name: 'Attack: Call a look-alike tool name' }).last().scrollIntoViewIfNeeded();
    await chat.screenshot({ path: fileURLToPath(new URL('./screenshots/attack-console.png', import.meta.url)) });
  });

  it('the audit chain of the whole run verifies afterwards (npm run audit:verify)', () => {
    const verify = spawnSync('npm', ['run', '--silent', 'audit:verify', '--', '--data', app.dataDir], {
      cwd: root,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', EXTENSIBLE_MCP_ORIGIN: app.origin },
    });
    expect(verify.stdout, verify.stderr).toMatch(
      /^audit chain verified: \d+ rows, checkpoint at row \d+ signed by did:web:/m,
    );
    expect(verify.status).toBe(0);
  });
});
