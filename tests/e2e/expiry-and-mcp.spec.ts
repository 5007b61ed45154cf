import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from './support/app-server';
import { type E2eBrowser, launchBrowser } from './support/browser';

// An approval given after its invoice expired (the household clock moved through the test clock
// file) is refused with a clear message and nothing is charged; and the embedded proxy is served
// at /mcp to an external SDK client with the bearer token, and to no one without it.
const token = 'e2e-mcp-token-0123456789abcdef';
const clockFolder = mkdtempSync(join(tmpdir(), 'e2e-clock-'));
const clockFile = join(clockFolder, 'offset-ms');
let app: AppServer;
const browsers: E2eBrowser[] = [];
let chat: Page;
let child: Page;

beforeAll(async () => {
  writeFileSync(clockFile, '0');
  app = await startAppServer({ EXTENSIBLE_MCP_TEST_CLOCK_FILE: clockFile, EXTENSIBLE_MCP_HTTP_TOKEN: token });
  for (let index = 0; index < 2; index++) browsers.push(await launchBrowser());
  const [chatBrowser, childBrowser] = browsers as [E2eBrowser, E2eBrowser];
  child = await childBrowser.page();
  await child.goto(`${app.origin}/approve?as=child`);
  await child.getByLabel('Enter the enrollment code printed in the terminal').fill(app.codes.child ?? '');
  await child.getByRole('button', { name: 'Register a passkey' }).click();
  await child.getByText('Signed in as child').waitFor();
  chat = await chatBrowser.page();
  await chat.goto(app.origin);
});

afterAll(async () => {
  for (const browser of browsers) await browser.close();
  await app?.close();
  rmSync(clockFolder, { recursive: true, force: true });
});

describe('expiry and /mcp against the production build', () => {
  it('an approval after the invoice expired is refused with a clear message, and nothing is charged', async () => {
    await chat.getByLabel('Message').fill('a cheese slice to 12 Main St');
    await chat.getByLabel('Message').press('Enter');
    const approve = child.getByRole('button', { name: 'Approve with passkey' });
    await approve.waitFor();
    // Six minutes later on the household's clock: the five-minute invoice has expired.
    writeFileSync(clockFile, String(6 * 60 * 1000));
    await approve.click();
    await child
      .getByRole('alert')
      .getByText(/expired/i)
      .waitFor();
    await chat
      .getByText(/expired/i)
      .last()
      .waitFor();
    await chat
      .getByText(/order again/i)
      .last()
      .waitFor();
    expect(await chat.getByRole('article', { name: 'Receipt' }).count()).toBe(0);
  });

  it('an SDK client with the token searches and gets a signed invoice over /mcp; without it, refused', async () => {
    const client = new Client({ name: 'e2e-mcp-client', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${app.origin}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    try {
      expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual([
        'search_tools',
        'call_tool',
        'load_mcp_server',
      ]);
      await client.callTool({ name: 'search_tools', arguments: { query: 'pizza invoice order', top_k: 10 } });
      const result = (await client.callTool({
        name: 'call_tool',
        arguments: {
          tool_name: 'pizza__request_invoice',
          arguments: { items: [{ sku: 'cheese-slice', qty: 1 }], deliverTo: '12 Main St' },
        },
      })) as CallToolResult;
      const text = result.content[0]?.type === 'text' ? result.content[0].text : '';
      expect(result.isError, text).toBeFalsy();
      expect(JSON.parse(text).invoice).toMatch(/^eyJ/);
    } finally {
      await client.close();
    }
    const stranger = new Client({ name: 'e2e-no-token', version: '1.0.0' });
    await expect(stranger.connect(new StreamableHTTPClientTransport(new URL(`${app.origin}/mcp`)))).rejects.toThrow();
  });
});
