/**
 * Real Chromium for the e2e specs: Debian's `chromium` driven by playwright-core, with the flags
 * this machine needs, a CDP WebAuthn virtual authenticator per page, axe-core for accessibility,
 * every Content-Security-Policy violation on every page recorded (the e2e setup fails a spec that
 * saw one it did not expect), and screenshots at 1280 px written under `tests/e2e/screenshots/`.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BrowserContext, chromium, type Page } from 'playwright-core';

/** Where Debian installs Chromium; `CHROMIUM_PATH` is read by the e2e config only. */
export const defaultChromium = '/usr/bin/chromium';

/** The flags headless Chromium needs here: no sandbox (root), no GPU, no network chatter. */
const chromiumFlags = [
  '--headless=new',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** One Content-Security-Policy violation a page reported (its `securitypolicyviolation` event). */
export interface CspViolation {
  readonly page: string;
  readonly directive: string;
  readonly blocked: string;
  readonly sample: string;
}

/** Every violation any page of any browser reported in this spec file and no test took as expected. */
const unexpectedViolations: CspViolation[] = [];

/** The violations recorded so far and not taken; the e2e setup asserts there are none after each spec file. */
export function untakenCspViolations(): readonly CspViolation[] {
  return unexpectedViolations;
}

/**
 * Takes (and so expects) the violations recorded so far on pages whose URL starts with `pageUrl`:
 * for a test that provokes one on purpose (an injected inline script).
 */
export function takeCspViolations(pageUrl: string): CspViolation[] {
  const taken = unexpectedViolations.filter((violation) => violation.page.startsWith(pageUrl));
  for (const violation of taken) unexpectedViolations.splice(unexpectedViolations.indexOf(violation), 1);
  return taken;
}

/** A persistent browser context of its own (cookies per context: one "browser" per context). */
export interface E2eBrowser {
  readonly context: BrowserContext;
  /** A new page with its own CDP virtual authenticator (platform, resident keys, UV). */
  page(): Promise<Page>;
  close(): Promise<void>;
}

/**
 * Records every CSP violation of the context's pages. The listener is installed through CDP
 * (Playwright's init script and binding), which the page's own policy does not govern, so the
 * check itself needs no weakening of the CSP; the report also arrives when the page's own
 * scripts were refused.
 */
async function recordCspViolations(context: BrowserContext): Promise<void> {
  await context.exposeBinding('__e2eCspViolation', (_source, violation: CspViolation) => {
    unexpectedViolations.push(violation);
  });
  await context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (event) => {
      const report = (window as unknown as { __e2eCspViolation: (violation: unknown) => Promise<void> })
        .__e2eCspViolation;
      void report({
        page: document.location.href,
        directive: event.effectiveDirective,
        blocked: event.blockedURI,
        sample: event.sample,
      });
    });
  });
}

/** Launches Chromium with a fresh profile at a 1280 px wide viewport. */
export async function launchBrowser(executablePath = defaultChromium): Promise<E2eBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'e2e-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    // Headless is passed as the flag itself (new headless), so Playwright must not add its own.
    headless: false,
    args: chromiumFlags,
    viewport: { width: 1280, height: 900 },
  });
  await recordCspViolations(context);
  return {
    context,
    async page() {
      const page = await context.newPage();
      const cdp = await context.newCDPSession(page);
      await cdp.send('WebAuthn.enable');
      await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: {
          protocol: 'ctap2',
          transport: 'internal',
          hasResidentKey: true,
          hasUserVerification: true,
          isUserVerified: true,
          automaticPresenceSimulation: true,
        },
      });
      return page;
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** One accessibility violation as axe reports it. */
export interface AxeViolation {
  readonly id: string;
  readonly impact: string | null;
  readonly help: string;
  readonly nodes: number;
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** Runs axe-core on the page; returns the serious and critical violations (the ones that fail a spec). */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  // Evaluated over CDP, not added as an inline <script>: the page's CSP (rightly) refuses those.
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (context: Document) => Promise<{ violations: unknown[] }> } })
      .axe;
    const result = await axe.run(document);
    return result.violations as Array<{ id: string; impact: string | null; help: string; nodes: unknown[] }>;
  });
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => ({
      id: violation.id,
      impact: violation.impact,
      help: violation.help,
      nodes: violation.nodes.length,
    }));
}

const screenshots = fileURLToPath(new URL('../screenshots/', import.meta.url));

/** Writes a full-page screenshot at 1280 px to `tests/e2e/screenshots/<name>.png`. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(screenshots, { recursive: true });
  const path = join(screenshots, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}
