import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from '../e2e/support/app-server';
import { type E2eBrowser, launchBrowser, screenshot, takeCspViolations } from '../e2e/support/browser';

// Issue 26 defect 9: the CSP was only `frame-ancestors 'none'`, so any markup that reached a page
// could run script. Now every response carries a strict policy with a nonce of its own; the pages
// still work under it (their scripts carry the nonce), and in Chromium an injected inline script,
// an injected event handler and an injected <script src> from elsewhere are all refused.
let app: AppServer;
let browser: E2eBrowser;
let page: Page;
const pages = ['/', '/log', '/audit', '/audit/no-such-order', '/approve', '/approve?as=child', '/approve?as=parent'];

beforeAll(async () => {
  app = await startAppServer();
  browser = await launchBrowser();
  page = await browser.page();
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
});

/** The policy's directives by name. */
function directives(policy: string): Map<string, string[]> {
  return new Map(
    policy
      .split(';')
      .map((directive) => directive.trim().split(/\s+/))
      .filter((parts): parts is [string, ...string[]] => parts[0] !== undefined && parts[0] !== '')
      .map(([name, ...values]) => [name, values]),
  );
}

describe('a strict Content-Security-Policy with per-request nonces', () => {
  it('every page carries it: a fresh nonce per response, strict-dynamic, no unsafe-inline, no objects, no <base>', async () => {
    const nonces = new Set<string>();
    for (const path of [...pages, '/api/health']) {
      for (let round = 0; round < 2; round++) {
        const response = await fetch(`${app.origin}${path}`);
        const policy = response.headers.get('content-security-policy') ?? '';
        // One policy: a second header (the old `frame-ancestors` one) would arrive joined by a comma.
        expect(policy, path).not.toContain(',');
        const parsed = directives(policy);
        const script = parsed.get('script-src') ?? [];
        const nonce = script.find((value) => /^'nonce-[A-Za-z0-9+/]{22}=='$/.test(value));
        expect(nonce, `${path}: ${policy}`).toBeDefined();
        nonces.add(nonce as string);
        expect(script, path).toContain("'strict-dynamic'");
        expect(script, path).not.toContain("'unsafe-inline'");
        expect(script, path).not.toContain("'unsafe-eval'");
        expect(parsed.get('style-src') ?? [], path).not.toContain("'unsafe-inline'");
        expect(parsed.get('object-src'), path).toEqual(["'none'"]);
        expect(parsed.get('base-uri'), path).toEqual(["'none'"]);
        expect(parsed.get('frame-ancestors'), path).toEqual(["'none'"]);
        if (path !== '/api/health') {
          // The page's own scripts carry this response's nonce, and only this one.
          const html = await response.text();
          const used = new Set([...html.matchAll(/<script\b[^>]*\snonce="([^"]+)"/g)].map((match) => match[1]));
          expect([...used], path).toEqual([(nonce as string).slice("'nonce-".length, -1)]);
          expect(html, path).not.toMatch(/<script(?![^>]*\snonce=")[^>]*>/);
        }
      }
    }
    // Two responses never share a nonce.
    expect(nonces.size).toBe((pages.length + 1) * 2);
  });

  it('the pages run under it in Chromium: no violation, and the chat comes alive', async () => {
    for (const path of pages) {
      await page.goto(`${app.origin}${path}`);
      await page.waitForLoadState('load');
    }
    await page.goto(app.origin);
    // Hydrated and connected: the message box becomes editable only once the session is live.
    await page.locator('#chat-input:not([readonly])').waitFor();
    expect(takeCspViolations(app.origin)).toEqual([]);
  });

  it('an injected inline script, event handler and foreign <script src> are refused, and Chromium reports each', async () => {
    // An HTML injection, as if some markup had slipped into the server's answer: the route's real
    // response (its own CSP header included) with three payloads added to the document.
    const injection = [
      "<script>window.__injected = 'inline'</script>",
      `<img src="data:," alt="" onerror="window.__injected = 'handler'">`,
      '<script src="http://127.0.0.1:9/evil.js"></script>',
    ].join('');
    await page.route(`${app.origin}/log`, async (route) => {
      const response = await route.fetch();
      const body = (await response.text()).replace('</body>', `${injection}</body>`);
      expect(body).toContain(injection);
      await route.fulfill({ response, body });
    });
    await page.goto(`${app.origin}/log`);
    await page.unroute(`${app.origin}/log`);
    // Chromium reports each refusal: the inline script, the handler, and the foreign URL.
    const seen: string[] = [];
    await expect
      .poll(() => {
        for (const violation of takeCspViolations(`${app.origin}/log`)) {
          seen.push(`${violation.directive} ${violation.blocked}`);
        }
        return [...new Set(seen)].sort();
      })
      .toEqual(['script-src-attr inline', 'script-src-elem http://127.0.0.1:9/evil.js', 'script-src-elem inline']);
    expect(await page.evaluate(() => (window as unknown as { __injected?: string }).__injected)).toBeUndefined();
    // The page's own, nonced scripts still ran: the live log hydrated and follows the stream.
    await page.locator('tr[data-event-id]').first().waitFor();
    await screenshot(page, 'csp-injected-script-refused');
  });
});
