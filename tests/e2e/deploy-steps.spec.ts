import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ShopProcess, startShopProcess } from '../deploy/shop-process';
import { type AppServer, freePort, root, startAppServer } from './support/app-server';
import { enrol } from './support/approval-windows';
import { type E2eBrowser, launchBrowser } from './support/browser';

// Issue 16: the deploy's steps outside Docker, exactly as deploy/docker-compose.yml orders them
// and with the commands the Dockerfiles run (deploy/steps.sh): the production build (this suite's
// global setup is `steps.sh build`); the app started with `PIZZA_URL` at a shop that is not up
// yet and a settlement-DID file; the app's healthcheck, which passes only with hybrid search; the
// shop started with `--http` on a loopback port, reading the DID from that file; its healthcheck;
// then one whole order through the HTTP transport with the offline planner and CDP virtual passkeys.
let app: AppServer;
let shop: ShopProcess;
let shopPort: number;
let home: string;
const browsers: E2eBrowser[] = [];
let chat: Page;
let child: Page;

/** Runs one deploy step to its end: its exit code and what it printed. */
function step(...args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const process_ = spawn('bash', ['deploy/steps.sh', ...args], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    process_.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    process_.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    process_.once('exit', (code) => resolve({ code, output }));
  });
}

/**
 * Docker's HEALTHCHECK loop, as the compose file configures it for the app: the check runs until
 * it passes, up to its retries; each run waits for the previous one to end, and between runs the
 * check's own interval passes, as Docker spaces them. Returns every run's output.
 */
async function untilHealthy(check: () => ReturnType<typeof step>, retries: number): Promise<string[]> {
  const outputs: string[] = [];
  for (let attempt = 0; attempt < retries; attempt++) {
    const result = await check();
    outputs.push(result.output.trim());
    if (result.code === 0) return outputs;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  throw new Error(`never healthy:\n${outputs.join('\n')}`);
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'e2e-deploy-'));
  shopPort = await freePort();
  const didFile = join(home, 'settlement', 'settlement-did');
  app = await startAppServer(
    { PIZZA_URL: `http://127.0.0.1:${shopPort}/mcp`, EXTENSIBLE_MCP_SETTLEMENT_DID_FILE: didFile },
    { command: 'bash', args: (port) => ['deploy/steps.sh', 'start-app', '127.0.0.1', String(port)] },
  );
  shop = startShopProcess({ port: shopPort, dataDir: join(home, 'shop'), didFile });
});

afterAll(async () => {
  for (const browser of browsers) await browser.close();
  await app?.close();
  await shop?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe('the deploy steps, outside Docker', () => {
  it("the app's healthcheck passes once search is hybrid, and the app published its settlement DID", async () => {
    // The app's own origin: any other Host (127.0.0.1 included) is refused (the Host rule).
    const appUrl = app.origin;
    const outputs = await untilHealthy(() => step('healthcheck-app', appUrl), 90);
    expect(outputs.at(-1)).toBe('healthy: app');
    // Every failed run said why (starting, or keyword search while the model loads).
    for (const output of outputs.slice(0, -1)) expect(output).toMatch(/^unhealthy: /);
    const health = (await (await fetch(`${appUrl}/api/health`)).json()) as { status: string; searchMode: string };
    expect(health).toEqual({ status: 'ok', searchMode: 'hybrid' });
    const published = readFileSync(join(home, 'settlement', 'settlement-did'), 'utf8');
    expect(published).toMatch(/^did:key:z6Mk\w+\n$/);
  });

  it('the shop, started after the healthy app, reads that DID, answers its healthcheck, and the app connects to it', async () => {
    const started = await shop.logged('server-started');
    expect(started.transport).toBe('http');
    expect(started.settlementDid).toBe(readFileSync(join(home, 'settlement', 'settlement-did'), 'utf8').trim());
    expect(await step('healthcheck-shop', `http://127.0.0.1:${shopPort}`)).toEqual({
      code: 0,
      output: 'healthy: shop\n',
    });
    // The household found no shop at its start and keeps trying PIZZA_URL: it connects now.
    await shop.logged('client-connected');
  });

  it('a whole order over the HTTP transport: the child approves with a passkey, the shop fulfils', async () => {
    for (let index = 0; index < 2; index++) browsers.push(await launchBrowser());
    const [chatBrowser, childBrowser] = browsers as [E2eBrowser, E2eBrowser];
    chat = await chatBrowser.page();
    child = await childBrowser.page();
    await enrol(child, app, 'child');
    await chat.goto(app.origin);
    await chat.getByLabel('Message').fill('a cheese slice to 12 Main St');
    await chat.getByLabel('Message').press('Enter');
    await chat
      .getByRole('article', { name: /Order from Main Street Pizza/ })
      .last()
      .waitFor();
    await child.getByRole('button', { name: 'Approve with passkey' }).click();
    await chat
      .getByRole('article', { name: 'Receipt' })
      .last()
      .getByText(/30 minutes/)
      .waitFor();
    // The shop process on the loopback port, the one started by the deploy step, signed and shipped it.
    const issued = await shop.logged('invoice-issued');
    const fulfilled = await shop.logged('order-fulfilled');
    expect(fulfilled.invoiceId).toBe(issued.invoiceId);
    expect(issued.totalCents).toBe(400);
  });
});
