import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type AppServer, startAppServer } from './support/app-server';
import { approve, enrol } from './support/approval-windows';
import { type E2eBrowser, launchBrowser, screenshot, seriousViolations } from './support/browser';

// Issue 29 "Standing allowances" in a real browser: the parent, who named the household at
// enrollment (Alex, and the child Sam), sets its time zone and signs $10.00 a day at Main Street
// Pizza with the passkey in the parent window; two $4.00 slices then need only the child's passkey
// (the parent window gets no request, the chat's card says what the allowance leaves), the third
// that day asks the parent again, and after the parent revokes, the next one asks the parent too.
// The windows, the chat's card and the audit page call the members by their names. That revoked
// allowance's budget was spent, so the slice after it needs the parent either way; a second
// allowance, revoked with its whole budget left, shows the revocation itself at work. Last, two
// slices asked for in two chats while the budget held one: the one paid second is handed to the
// parent in the same request, and the parent's passkey pays it once.
let app: AppServer;
const browsers: E2eBrowser[] = [];
let chat: Page;
let child: Page;
let parent: Page;

async function order(text: string): Promise<void> {
  await chat.getByLabel('Message').fill(text);
  await chat.getByLabel('Message').press('Enter');
}

const cards = () => chat.getByRole('article', { name: /Order from Main Street Pizza/ });
const receipts = () => chat.getByRole('article', { name: 'Receipt' });

/** A slice ordered in the chat; its card once the approval request is made. */
async function orderSlice(count: number) {
  await order('a cheese slice to 12 Main St');
  await cards().nth(count).waitFor();
  await child.getByRole('button', { name: 'Approve with passkey' }).waitFor();
  return cards().nth(count);
}

beforeAll(async () => {
  app = await startAppServer();
  for (let index = 0; index < 3; index++) browsers.push(await launchBrowser());
  const [chatBrowser, childBrowser, parentBrowser] = browsers as [E2eBrowser, E2eBrowser, E2eBrowser];
  chat = await chatBrowser.page();
  child = await childBrowser.page();
  parent = await parentBrowser.page();
  await enrol(child, app, 'child');
  await enrol(parent, app, 'parent', { parent: 'Alex', child: 'Sam' });
  await chat.goto(app.origin);
  await chat.locator('#chat-input:not([readonly])').waitFor();
});

afterAll(async () => {
  for (const browser of browsers) await browser.close();
  await app?.close();
});

describe('a standing allowance in the windows', () => {
  it("the parent sets the household's time zone, which the allowance form then shows", async () => {
    await parent.bringToFront();
    const household = parent.getByRole('form', { name: 'Household' });
    expect(await household.getByLabel('Your name').inputValue()).toBe('Alex');
    expect(await household.getByLabel("Your child's name").inputValue()).toBe('Sam');
    await household.getByLabel('Time zone').selectOption('Europe/Paris');
    await household.getByRole('button', { name: 'Save' }).click();
    await parent.getByText('Saved ✓').waitFor();
    await parent.getByRole('form', { name: 'New allowance' }).getByText('(Europe/Paris)').waitFor();
    // The child's window names the child too (it reads the names every five seconds).
    await child.getByText('Signed in as Sam (child)').waitFor();
    await screenshot(parent, 'allowance-household');
  });

  it('the parent signs $10.00 a day at Main Street Pizza with the passkey', async () => {
    await parent.bringToFront();
    const form = parent.getByRole('form', { name: 'New allowance' });
    await form.getByText('without asking you').waitFor();
    expect(await form.locator('p').first().textContent()).toBe(
      'Let Sam order from Main Street Pizza without asking you',
    );
    await screenshot(parent, 'allowance-form');
    expect(await seriousViolations(parent)).toEqual([]);
    await form.getByLabel('Per-order cap in dollars').fill('5.00');
    await form.getByLabel('Budget in dollars').fill('10.00');
    await form.getByLabel('Period').selectOption('day');
    // The end is the last second of the chosen day in the household's zone (Paris), not the browser's (UTC).
    const [year, month, day] = (await form.getByLabel('Until').inputValue()).split('-').map(Number) as number[];
    const until = new Date(Date.UTC(year ?? 0, (month ?? 1) - 1, day)).toLocaleDateString('en-GB', {
      day: 'numeric',
      month: 'short',
      timeZone: 'UTC',
    });
    await form.getByRole('button', { name: 'Sign with passkey' }).click();
    await parent
      .getByText(`Allowance signed ✓ — Sam can order up to $5.00 at a time, $10.00 a day, until ${until}.`)
      .waitFor();
    const row = parent.getByRole('listitem', { name: 'Allowance at Main Street Pizza' });
    await row.getByText('$10.00 left today').waitFor();
    await row.getByText('Main Street Pizza · Sam').waitFor();
    await row.getByText('(Europe/Paris)', { exact: false }).waitFor();
    await screenshot(parent, 'allowance-signed');
  });

  it("two $4.00 slices need only the child's passkey; the parent window gets no request", async () => {
    for (const [index, left] of [
      [0, '$6.00'],
      [1, '$2.00'],
    ] as const) {
      const card = await orderSlice(index);
      await card.getByText(`covered by their allowance (${left} left today)`).waitFor();
      await card.getByText('Alex (parent)').waitFor();
      expect(await card.getByText('○ waiting').count()).toBe(1);
      await card.getByText('Sam (child)').waitFor();
      await card.getByText(/Waiting for Sam's passkey in the/).waitFor();
      await child.getByText(`nobody else — covered by Alex's allowance (${left} left today)`).waitFor();
      if (index === 0) {
        await screenshot(chat, 'allowance-card');
        await screenshot(child, 'allowance-child-window');
      }
      await approve(child);
      await receipts()
        .nth(index)
        .getByText(/30 minutes/)
        .waitFor();
      await parent
        .getByRole('listitem', { name: 'Allowance at Main Street Pizza' })
        .getByText(`${left} left today`)
        .waitFor();
      // Never asked: the parent's list stayed empty throughout.
      expect(await parent.getByRole('button', { name: 'Approve with passkey' }).count()).toBe(0);
      await parent.getByText('No orders are waiting for you.').waitFor();
    }
    await screenshot(parent, 'allowance-two-spent');
  });

  it("the order paid on it shows, on the audit page, the allowance in place of the parent's approval", async () => {
    const [audit] = await Promise.all([
      chat.context().waitForEvent('page'),
      receipts().first().getByRole('link', { name: 'See the evidence chain for this order' }).click(),
    ]);
    const link = audit.locator('[data-step="allowance"]');
    await link.waitFor();
    expect(await link.getAttribute('data-verified')).toBe('yes');
    await link.getByText('$6.00', { exact: true }).waitFor();
    await link.getByText('up to $5.00').waitFor();
    await link.getByText("Alex's (the parent's) standing allowance, in place of the parent's approval").waitFor();
    await audit.getByText("Sam's (the child's) approval with a passkey").waitFor();
    await screenshot(audit, 'allowance-audit');
    await audit.close();
  });

  it('the third slice that day asks the parent again', async () => {
    const card = await orderSlice(2);
    await card.getByText('○ waiting').nth(1).waitFor();
    expect(await card.getByText(/covered by .* allowance/).count()).toBe(0);
    await approve(child);
    await parent.getByRole('button', { name: 'Approve with passkey' }).waitFor();
    const asking = parent.getByRole('article', { name: /Order from Main Street Pizza/ });
    await asking.getByText('Sam asks to order from Main Street Pizza.').waitFor();
    await asking.getByText('Sam, the child (approved ✓)').waitFor();
    await screenshot(parent, 'allowance-third-asks-parent');
    await approve(parent);
    await receipts()
      .nth(2)
      .getByText(/30 minutes/)
      .waitFor();
  });

  it('the parent revokes, and the next slice asks the parent', async () => {
    const row = parent.getByRole('listitem', { name: 'Allowance at Main Street Pizza' });
    await parent.bringToFront();
    await row.getByRole('button', { name: 'Revoke' }).click();
    const confirm = row.getByRole('alertdialog');
    await confirm
      .getByText("Revoke Sam's allowance at Main Street Pizza? Orders will need your approval again.")
      .waitFor();
    await screenshot(parent, 'allowance-revoke-confirm');
    await confirm.getByRole('button', { name: 'Revoke' }).click();
    await row.getByText('Revoked ✓ just now').waitFor();
    expect(await row.getAttribute('data-state')).toBe('revoked');
    await screenshot(parent, 'allowance-revoked');

    const card = await orderSlice(3);
    expect(await card.getByText(/covered by .* allowance/).count()).toBe(0);
    await approve(child);
    await parent.getByRole('button', { name: 'Approve with passkey' }).waitFor();
    await screenshot(chat, 'allowance-after-revoke');
  });

  it('a new allowance revoked with its whole budget left covers nothing: the next slice asks the parent', async () => {
    // The parent declines the slice still waiting for them, which ends the chat's turn.
    await parent.bringToFront();
    await parent.getByRole('button', { name: 'Decline' }).click();
    await parent.getByText('You declined this order. Nothing will be charged.').waitFor();
    await chat.locator('#chat-input:not([readonly])').waitFor();
    // Signed again: $10.00 left today, so only a revocation can make a $4.00 slice ask the parent.
    await parent
      .getByRole('form', { name: 'New allowance' })
      .getByRole('button', { name: 'Sign with passkey' })
      .click();
    const rows = parent.getByRole('listitem', { name: 'Allowance at Main Street Pizza' });
    // Newest first: the new allowance above the revoked one.
    await rows.nth(1).waitFor();
    const fresh = rows.first();
    await fresh.getByText('$10.00 left today').waitFor();
    await fresh.getByRole('button', { name: 'Revoke' }).click();
    await fresh.getByRole('alertdialog').getByRole('button', { name: 'Revoke' }).click();
    await fresh.getByText('Revoked ✓ just now').waitFor();
    expect(await rows.evaluateAll((items) => items.map((item) => item.getAttribute('data-state')))).toEqual([
      'revoked',
      'revoked',
    ]);

    const card = await orderSlice(4);
    // The parent's leg waits for the parent; neither the chat's card nor the child's says "covered".
    await card.getByText('○ waiting').nth(1).waitFor();
    expect(await card.getByText(/covered by .* allowance/).count()).toBe(0);
    const asking = child
      .getByRole('article')
      .filter({ has: child.getByRole('button', { name: 'Approve with passkey' }) });
    await asking.getByText('Alex, the parent (waiting)').waitFor();
    await screenshot(child, 'allowance-revoked-with-budget-left');
  });
  it("a slice the child approved under the allowance, whose budget another slice spent first, asks the parent in the same request; the parent's passkey pays it once", async () => {
    // The slice still waiting for the parent is declined, which ends the chat's turn.
    await parent.bringToFront();
    await parent.getByRole('button', { name: 'Decline' }).click();
    await chat.locator('#chat-input:not([readonly])').waitFor();
    // $5.00 a day: one $4.00 slice fits, two do not.
    const form = parent.getByRole('form', { name: 'New allowance' });
    await form.getByLabel('Per-order cap in dollars').fill('5.00');
    await form.getByLabel('Budget in dollars').fill('5.00');
    await form.getByLabel('Period').selectOption('day');
    await form.getByRole('button', { name: 'Sign with passkey' }).click();
    const allowance = parent.getByRole('listitem', { name: 'Allowance at Main Street Pizza' }).first();
    await allowance.getByText('$5.00 left today').waitFor();

    // Two chats each ask for a slice while $5.00 is left: each request asks only the child, and each
    // card says what the allowance would leave after it.
    const secondBrowser = await launchBrowser();
    browsers.push(secondBrowser);
    const chat2 = await secondBrowser.page();
    await chat2.goto(app.origin);
    await chat2.locator('#chat-input:not([readonly])').waitFor();
    const paidBefore = await receipts().count();
    const firstCard = await orderSlice(5);
    await chat2.getByLabel('Message').fill('a cheese slice to 12 Main St');
    await chat2.getByLabel('Message').press('Enter');
    const secondCard = chat2.getByRole('article', { name: /Order from Main Street Pizza/ });
    for (const card of [firstCard, secondCard]) {
      await card.getByText('covered by their allowance ($1.00 left today)').waitFor();
    }
    const approveButtons = child.getByRole('button', { name: 'Approve with passkey' });
    await approveButtons.nth(1).waitFor();

    // The child approves one: it is paid on the allowance, which leaves $1.00.
    await child.bringToFront();
    await approveButtons.first().click();
    const receipts2 = chat2.getByRole('article', { name: 'Receipt' });
    const paidFirst = await vi.waitFor(
      async () => {
        if ((await receipts().count()) > paidBefore) return { paid: chat, waiting: chat2 };
        if ((await receipts2.count()) > 0) return { paid: chat2, waiting: chat };
        throw new Error('no receipt yet');
      },
      { timeout: 60_000, interval: 250 },
    );
    await allowance.getByText('$1.00 left today').waitFor();

    // The child approves the other: the allowance no longer covers it, so the same request asks the
    // parent, nothing charged; the chat's card, the child's window and the parent's say why.
    await child.bringToFront();
    await approveButtons.first().click();
    const why = "the allowance's budget for today was spent by another order before it was paid";
    const waitingCard = paidFirst.waiting.getByRole('article', { name: /Order from Main Street Pizza/ }).last();
    await waitingCard.getByText(`Not paid: ${why}, so Alex must approve it too. Nothing was charged.`).waitFor();
    await waitingCard.getByText(/Waiting for Alex's passkey in the/).waitFor();
    await child.getByText(`Not paid: ${why}, so Alex must approve it too. Nothing was charged.`).waitFor();
    const asking = parent
      .getByRole('article', { name: /Order from Main Street Pizza/ })
      .filter({ has: parent.getByRole('button', { name: 'Approve with passkey' }) });
    await asking
      .getByText(`Sam approved this under your allowance, but ${why}. Nothing was charged: it needs your passkey now.`)
      .waitFor();
    await asking.getByText('Sam, the child (approved ✓)').waitFor();
    await screenshot(paidFirst.waiting, 'allowance-handed-over-chat');
    await screenshot(parent, 'allowance-handed-over-parent');
    await screenshot(child, 'allowance-handed-over-child');
    expect(await seriousViolations(parent)).toEqual([]);

    // The parent approves: the same request is paid once, with both approvals, and the allowance's
    // dollar stays left.
    await approve(parent);
    await paidFirst.waiting
      .getByRole('article', { name: 'Receipt' })
      .last()
      .getByText(/30 minutes/)
      .waitFor();
    await allowance.getByText('$1.00 left today').waitFor();
    expect(await receipts().count()).toBe(paidBefore + 1);
    expect(await receipts2.count()).toBe(1);
  });
});
