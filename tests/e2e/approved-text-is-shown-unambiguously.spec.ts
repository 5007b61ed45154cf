import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { SignJWT } from 'jose';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadOrCreateMerchantKey } from '../../shop-agent/index';
import { type AppServer, startAppServer } from './support/app-server';
import { enrol } from './support/approval-windows';
import { type E2eBrowser, launchBrowser, screenshot, seriousViolations } from './support/browser';

// Issue 26 item 3: the parent's window showed "tS niaM 21" for the signed "\u202e12 Main St".
// The shop now refuses such terms, so this spec plays a trusted merchant that signs them anyway
// (its key read from the shop's data folder), puts the invoice to the household over /mcp, and
// checks in Chromium what the child's window renders: every control, format or separator
// character as a visible, marked escape, and the address laid out left to right as signed.
const token = 'e2e-mcp-token-ambiguous-0123456789';
let app: AppServer;
let browser: E2eBrowser;
let child: Page;

beforeAll(async () => {
  app = await startAppServer({ EXTENSIBLE_MCP_HTTP_TOKEN: token });
  browser = await launchBrowser();
  child = await browser.page();
  await enrol(child, app, 'child');
});

afterAll(async () => {
  await browser?.close();
  await app?.close();
});

/** An invoice signed with the trusted merchant's own key, with the texts a hostile merchant chose. */
async function hostileInvoice(text: { deliverTo: string; itemName: string }): Promise<string> {
  const key = await loadOrCreateMerchantKey(join(app.dataDir, 'shop'));
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    vc: {
      '@context': ['https://www.w3.org/2018/credentials/v1'],
      type: ['VerifiableCredential', 'Invoice'],
      credentialSubject: {
        merchantId: key.did,
        merchantName: 'Main Street Pizza',
        items: [{ sku: 'cheese-slice', name: text.itemName, qty: 1, unitPriceCents: 400, listPriceCents: 400 }],
        totalCents: 400,
        currency: 'usd',
        deliverTo: text.deliverTo,
      },
    },
  })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid: key.kid })
    .setIssuer(key.did)
    .setJti(`urn:uuid:${randomUUID()}`)
    .setIssuedAt(now)
    .setNotBefore(now)
    .setExpirationTime(now + 300)
    .sign(key.privateKey);
}

/** `request_approval` over /mcp, as an external client with the token would. */
async function requestApproval(invoice: string): Promise<void> {
  const client = new Client({ name: 'e2e-hostile-merchant', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${app.origin}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  try {
    await client.callTool({ name: 'search_tools', arguments: { query: 'request approval household', top_k: 10 } });
    const result = (await client.callTool({
      name: 'call_tool',
      arguments: { tool_name: 'request_approval', arguments: { invoice } },
    })) as CallToolResult;
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
  } finally {
    await client.close();
  }
}

describe('the approval window shows signed text unambiguously (issue 26 item 3)', () => {
  it('shows a right-to-left override, a control and a zero-width space as marked escapes, in signed order', async () => {
    await requestApproval(
      await hostileInvoice({ deliverTo: '\u202e12 Main St\u0007', itemName: 'Cheese\u200b slice' }),
    );
    const card = child.getByRole('article', { name: /^Order from Main Street Pizza/ });
    await card.waitFor();
    const address = card.locator('dt:text-is("Deliver to") + dd');

    // Laid out as signed: the "1" of "12" is left of the "S" of "St" (with the override acting,
    // Chromium draws "tS niaM 21", the "1" at the right end).
    const positions = await address.evaluate((element) => {
      const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
      const leftOf = (character: string): number | undefined => {
        for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
          const index = node.textContent?.indexOf(character) ?? -1;
          if (index < 0) continue;
          const range = document.createRange();
          range.setStart(node, index);
          range.setEnd(node, index + 1);
          return range.getBoundingClientRect().left;
        }
        return undefined;
      };
      const one = leftOf('1');
      walker.currentNode = element;
      const capitalS = leftOf('S');
      return { one, capitalS };
    });
    expect(positions.one).toBeDefined();
    expect(positions.capitalS).toBeDefined();
    expect(positions.one ?? 0).toBeLessThan(positions.capitalS ?? 0);

    // What a person reads: every hidden character as its escape, nothing acting on the text.
    expect(await address.textContent()).toBe('\\u202E12 Main St\\u0007');
    expect(
      await address
        .locator('[data-hidden-character]')
        .evaluateAll((marks) => marks.map((mark) => mark.getAttribute('data-hidden-character'))),
    ).toEqual(['U+202E', 'U+0007']);
    expect(await card.getByRole('cell', { name: /Cheese/ }).textContent()).toBe('Cheese\\u200B slice');
    const rendered = await card.evaluate((element) => element.textContent ?? '');
    for (const hidden of ['\u202e', '\u0007', '\u200b']) expect(rendered).not.toContain(hidden);

    // The window says why the codes are there, and the page stays accessible.
    await expect(card.getByRole('note').textContent()).resolves.toMatch(/invisible or control characters/);
    expect(await seriousViolations(child)).toEqual([]);
    await screenshot(child, 'approve-ambiguous-text');
  });
});
