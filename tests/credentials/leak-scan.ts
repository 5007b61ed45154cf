import { afterAll, expect } from 'vitest';

/**
 * Every token string this tests use. Distinctive, so a substring match is meaningful;
 * each test file scans everything it captured for all of them.
 */
export const testTokens = {
  configured: 'tok-configured-7f3a9c1e',
  rotated: 'tok-rotated-b52d6e08',
  revokedByServer: 'tok-server-side-41c0aa9d',
  wrong: 'tok-wrong-0d9e77f2',
  added: 'tok-added-e81b3c5a',
  other: 'tok-other-line-3390ad1b',
  relative: 'tok-relative-c7e2194f',
} as const;

const allTokens = Object.values(testTokens);

/**
 * Collects every model-visible output, log line, event and CLI output a test file sees, and
 * after the file asserts that no token string appears in any of it (SPEC §10 invariant 3).
 */
export function leakScan(): { capture(text: unknown): void; readonly captured: string[] } {
  const captured: string[] = [];
  afterAll(() => {
    expect(captured.length).toBeGreaterThan(0);
    for (const text of captured) {
      for (const token of allTokens) expect(text).not.toContain(token);
    }
  });
  return {
    captured,
    capture(text) {
      captured.push(typeof text === 'string' ? text : JSON.stringify(text));
    },
  };
}
