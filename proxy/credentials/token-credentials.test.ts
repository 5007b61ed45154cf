import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createTokenCredentials } from './token-credentials';

const configured: Record<string, string> = { notion: 'https://mcp.notion.example/mcp' };

function setup(text: string, now = () => Date.now()) {
  const tokensPath = join(mkdtempSync(join(tmpdir(), 'emcp-cred-unit-')), 'tokens');
  writeFileSync(tokensPath, text);
  const logs: string[] = [];
  const lookup = createTokenCredentials({
    tokensPath,
    log: (line) => logs.push(line),
    now,
  });
  /** Asks as the gateway does: with the URL the operator admitted the name at. */
  const ask = (serverName: string, url: string) => lookup({ serverName, url, configuredUrl: configured[serverName] });
  return { tokensPath, logs, lookup: ask };
}

describe('createTokenCredentials', () => {
  it('presents the bearer token only at the configured URL of a configured name', () => {
    const { lookup, logs } = setup('notion=secret-aaaa\nnewcomer=secret-bbbb\n');
    expect(lookup('notion', 'https://MCP.notion.example/mcp/')?.headers).toEqual({
      Authorization: 'Bearer secret-aaaa',
    });
    expect(lookup('notion', 'https://attacker.example/mcp')).toBeUndefined();
    expect(lookup('newcomer', 'https://mcp.notion.example/mcp')).toBeUndefined();
    expect(logs.join('\n')).toContain('connecting to https://attacker.example/mcp without its token');
    expect(logs.join('\n')).not.toContain('secret-');
  });

  it('reads the file fresh on every request (rotation without restart)', () => {
    const { lookup, tokensPath } = setup('notion=secret-one\n');
    expect(lookup('notion', configured.notion ?? '')?.headers.Authorization).toBe('Bearer secret-one');
    writeFileSync(tokensPath, 'notion=secret-two\n');
    expect(lookup('notion', configured.notion ?? '')?.headers.Authorization).toBe('Bearer secret-two');
    writeFileSync(tokensPath, '# revoked\n');
    expect(lookup('notion', configured.notion ?? '')).toBeUndefined();
  });

  it('picks up a same-length token written in place at once, though file times are coarse', () => {
    const { lookup, tokensPath } = setup('notion=secret-one\n');
    for (const token of ['secret-two', 'secret-six', 'secret-ten']) {
      // Same size, same inode, likely the same file time as the write before: still read afresh.
      writeFileSync(tokensPath, `notion=${token}\n`);
      expect(lookup('notion', configured.notion ?? '')?.headers.Authorization).toBe(`Bearer ${token}`);
    }
  });

  it('picks up a tokens file that appears after requests found none', () => {
    const { lookup, tokensPath } = setup('');
    const later = `${tokensPath}-later`;
    const credentials = createTokenCredentials({ tokensPath: later, log: () => undefined });
    const ask = () =>
      credentials({ serverName: 'notion', url: configured.notion ?? '', configuredUrl: configured.notion });
    expect(ask()).toBeUndefined();
    writeFileSync(later, 'notion=secret-new\n');
    expect(ask()?.headers.Authorization).toBe('Bearer secret-new');
    expect(lookup('notion', configured.notion ?? '')).toBeUndefined();
  });

  it('dates a value from the file mtime when first seen, and keeps that date while the value is unchanged', () => {
    let clock = Date.now();
    const { lookup, tokensPath } = setup('notion=secret-one\n', () => clock);
    const written = new Date(clock - 2 * 3_600_000);
    utimesSync(tokensPath, written, written);
    expect(lookup('notion', configured.notion ?? '')?.unchangedSince).toBeCloseTo(written.getTime(), -1);
    // Another line changes (mtime moves); notion's value does not: its date stays.
    writeFileSync(tokensPath, 'notion=secret-one\nother=x\n');
    clock += 60_000;
    expect(lookup('notion', configured.notion ?? '')?.unchangedSince).toBeCloseTo(written.getTime(), -1);
    // notion's value changes: dated from the new mtime (never in the future).
    writeFileSync(tokensPath, 'notion=secret-two\n');
    const since = lookup('notion', configured.notion ?? '')?.unchangedSince ?? 0;
    expect(since).toBeGreaterThan(written.getTime());
    expect(since).toBeLessThanOrEqual(clock);
  });

  it('refuses a token that cannot be a header value, without quoting it', () => {
    const { lookup } = setup('notion=secret\u2011dash\n');
    expect(() => lookup('notion', configured.notion ?? '')).toThrow(/cannot be sent in an HTTP header/);
    try {
      lookup('notion', configured.notion ?? '');
    } catch (error) {
      expect(String(error)).not.toContain('secret');
    }
  });

  it('connects anonymously when the tokens file is missing, and says so once', () => {
    const { lookup, tokensPath, logs } = setup('');
    writeFileSync(tokensPath, '');
    const missing = createTokenCredentials({
      tokensPath: `${tokensPath}-missing`,
      log: (line) => logs.push(line),
    });
    expect(lookup('notion', configured.notion ?? '')).toBeUndefined();
    expect(
      missing({ serverName: 'notion', url: configured.notion ?? '', configuredUrl: configured.notion }),
    ).toBeUndefined();
    expect(
      missing({ serverName: 'notion', url: configured.notion ?? '', configuredUrl: configured.notion }),
    ).toBeUndefined();
    expect(logs.filter((line) => line.includes('not present'))).toHaveLength(1);
  });
});
