import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ProxyError } from '../errors';
import { parseTokens, resolveTokensPath, writeToken } from './tokens-file';

function folder(): string {
  return mkdtempSync(join(tmpdir(), 'emcp-tokens-unit-'));
}

describe('parseTokens', () => {
  it('reads name=value lines, skips blanks and comments, strips quotes, last line wins', () => {
    const parsed = parseTokens(
      [
        '# comment',
        '',
        '  notion = "abc#def" ',
        "github='ghp_x'",
        'plain=a=b',
        'dup=first',
        'dup=second',
        'not a line',
        'empty=',
        '\r',
      ].join('\r\n'),
    );
    expect(Object.fromEntries(parsed.tokens)).toEqual({
      notion: 'abc#def',
      github: 'ghp_x',
      plain: 'a=b',
      dup: 'second',
    });
    // Only the line number of a malformed line is reported, never its content.
    expect(parsed.malformedLines).toEqual([8]);
  });
});

describe('resolveTokensPath', () => {
  it('defaults to "tokens" beside the config, which may not exist yet', () => {
    const dir = folder();
    expect(resolveTokensPath({ configPath: join(dir, 'config.json') })).toEqual({
      path: join(dir, 'tokens'),
      explicit: false,
    });
  });

  it('resolves a relative override against the config folder and expands "~"', () => {
    const dir = folder();
    const home = folder();
    mkdirSync(join(dir, 'secrets'));
    writeFileSync(join(dir, 'secrets', 'tok'), '');
    writeFileSync(join(home, 'tok'), '');
    const configPath = join(dir, 'config.json');
    expect(resolveTokensPath({ configPath, override: 'secrets/tok' }).path).toBe(join(dir, 'secrets', 'tok'));
    expect(resolveTokensPath({ configPath, override: '~/tok', home }).path).toBe(join(home, 'tok'));
    expect(resolveTokensPath({ configPath, override: join(home, 'tok') }).path).toBe(join(home, 'tok'));
  });

  it('refuses an override that does not exist', () => {
    const dir = folder();
    expect(() => resolveTokensPath({ configPath: join(dir, 'config.json'), override: 'nope' })).toThrow(ProxyError);
    expect(() => resolveTokensPath({ configPath: join(dir, 'config.json'), override: 'nope' })).toThrow(
      /tokens file not found/,
    );
  });
});

describe('writeToken', () => {
  it('creates the file with mode 0600', () => {
    const path = join(folder(), 'tokens');
    writeToken({ path, name: 'a', value: 'one' });
    expect(readFileSync(path, 'utf8')).toBe('a=one\n');
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('replaces an existing line in place, keeps comments and other lines, leaves no temporary file', () => {
    const dir = folder();
    const path = join(dir, 'tokens');
    writeFileSync(path, '# keep me\nb=two\n# a=commented\na="old"\nc=three', { mode: 0o640 });
    writeToken({ path, name: 'a', value: 'new' });
    expect(readFileSync(path, 'utf8')).toBe('# keep me\nb=two\n# a=commented\na=new\nc=three\n');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(['tokens']);
  });

  it('writes through a symlink to the file it points at', () => {
    const dir = folder();
    const real = join(dir, 'real-tokens');
    writeFileSync(real, 'x=1\n');
    symlinkSync(real, join(dir, 'tokens'));
    writeToken({ path: join(dir, 'tokens'), name: 'y', value: '2' });
    expect(readFileSync(real, 'utf8')).toBe('x=1\ny=2\n');
  });

  it('leaves no temporary file when the write fails', () => {
    const dir = folder();
    // The target is a folder: the rename fails after the temporary file was written.
    mkdirSync(join(dir, 'tokens'));
    expect(() => writeToken({ path: join(dir, 'tokens', '..', 'tokens'), name: 'a', value: 'b' })).toThrow();
    expect(readdirSync(dir)).toEqual(['tokens']);
  });
});
