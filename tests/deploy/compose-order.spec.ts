import { execFileSync } from 'node:child_process';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { root } from '../e2e/support/app-server';
import { approve, enrol, type Household } from '../e2e/support/approval-windows';
import { type E2eBrowser, launchBrowser } from '../e2e/support/browser';

// Issue 27: the Docker showcase, ordered from. Run by scripts/deploy-run.sh (step "checks") once
// deploy/docker-compose.yml is up in a real engine and both containers are healthy; the harness
// sets DEPLOY_COMPOSE_URL to the published port. Chromium against that port, the enrollment codes
// read from the app container's log, a CDP virtual authenticator in the child's and the parent's
// windows: a whole $15 order, then a restart of the shop container and the next order. Without
// DEPLOY_COMPOSE_URL, or with no stack behind it, every test fails: it never skips.
// Issue 28: with DEPLOY_COMPOSE_STACK=postgres the harness runs it against
// deploy/docker-compose.postgres.yml instead, nginx in front of two app instances on one
// database: the codes are the first instance's (the harness's `app-log` is app-a's then), and the
// order's requests go round robin to both. The shop's restart is the first stack's test only.
const url = process.env.DEPLOY_COMPOSE_URL;
const stack = process.env.DEPLOY_COMPOSE_STACK ?? 'single';
const browsers: E2eBrowser[] = [];
let chat: Page;
let child: Page;
let parent: Page;

/** A subcommand of the harness that runs this spec (`app-log`, `restart-shop`): its output. */
function harness(command: 'app-log' | 'restart-shop'): string {
  return execFileSync('bash', ['scripts/deploy-run.sh', command], { cwd: root, encoding: 'utf8' });
}

/** The enrollment codes the app container (app-a on the PostgreSQL stack) printed at its start, by role. */
function codesFromLog(log: string): Household['codes'] {
  const codes: Partial<Record<'child' | 'parent', string>> = {};
  for (const [, role, code] of log.matchAll(
    /Enrollment code for (child|parent): ((?:child|parent)-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4})/g,
  )) {
    if (role && code) codes[role as 'child' | 'parent'] = code;
  }
  return codes;
}

async function order(text: string): Promise<void> {
  await chat.bringToFront();
  await chat.locator('#chat-input:not([readonly])').waitFor();
  await chat.getByLabel('Message').fill(text);
  await chat.getByLabel('Message').press('Enter');
}

beforeAll(async () => {
  if (stack !== 'single' && stack !== 'postgres') {
    throw new Error(`DEPLOY_COMPOSE_STACK is single or postgres, not ${stack}`);
  }
  if (url === undefined) {
    throw new Error('DEPLOY_COMPOSE_URL is not set: this spec runs inside scripts/deploy-run.sh, against its stack');
  }
  const health = await fetch(new URL('/api/health', url)).catch((error: unknown) => {
    throw new Error(`no compose stack answers at ${url}: ${String(error)}`);
  });
  expect(health.status).toBe(200);
  const codes = codesFromLog(harness('app-log'));
  expect(Object.keys(codes).sort(), "the app container's log shows both codes").toEqual(['child', 'parent']);
  const household: Household = { origin: url, codes };
  for (let index = 0; index < 3; index++) browsers.push(await launchBrowser());
  const [chatBrowser, childBrowser, parentBrowser] = browsers as [E2eBrowser, E2eBrowser, E2eBrowser];
  chat = await chatBrowser.page();
  child = await childBrowser.page();
  parent = await parentBrowser.page();
  await enrol(child, household, 'child');
  await enrol(parent, household, 'parent');
  await chat.goto(url);
});

afterAll(async () => {
  for (const browser of browsers) await browser.close();
});

describe('the compose stack, through its published port', () => {
  it('a whole $15 order: a large pepperoni, approved by the child and then the parent, completes with an ETA', async () => {
    await order('a large pepperoni to 12 Main St');
    await chat
      .getByRole('article', { name: /Order from Main Street Pizza/ })
      .last()
      .waitFor();
    // The child's window shows the signed terms: $15, over the child's own limit.
    await child.getByRole('article', { name: /Order from Main Street Pizza for \$15\.00/ }).waitFor();
    await child.getByRole('button', { name: 'Approve with passkey' }).waitFor();
    await approve(child);
    await parent.getByRole('button', { name: 'Approve with passkey' }).waitFor();
    await approve(parent);
    await chat
      .getByRole('article', { name: 'Receipt' })
      .first()
      .getByText(/30 minutes/)
      .waitFor();
    expect(await chat.getByRole('article', { name: 'Receipt' }).count()).toBe(1);
  });

  if (stack === 'single') {
    it('after a restart of the shop container, the next order completes with no restart of the app', async () => {
      harness('restart-shop');
      await order('a cheese slice to 12 Main St');
      await child.getByRole('button', { name: 'Approve with passkey' }).waitFor();
      await approve(child);
      await chat
        .getByRole('article', { name: 'Receipt' })
        .nth(1)
        .getByText(/30 minutes/)
        .waitFor();
    });
  }
});
