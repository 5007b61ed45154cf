/**
 * Real Chromium for the e2e specs: Debian's `chromium` driven by playwright-core, with the flags
 * this machine needs, a CDP WebAuthn virtual authenticator per page, axe-core for accessibility,
 * and screenshots at 1280 px written under `tests/e2e/screenshots/`.
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

/** A persistent browser context of its own (cookies per context: one "browser" per context). */
export interface E2eBrowser {
  readonly context: BrowserContext;
  /** A new page with its own CDP virtual authenticator (platform, resident keys, UV). */
  page(): Promise<Page>;
  close(): Promise<void>;
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
  await page.addScriptTag({ content: axeSource });
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
