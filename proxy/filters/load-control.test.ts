import { describe, expect, it } from 'vitest';
import { globProblem, loadControl, urlPatternProblem } from './load-control';

const context = { principal: { id: 'test' }, scope: { kind: 'session' as const, id: 's' } };
const decide = (options: Parameters<typeof loadControl>[0], url: string, serverName = 'x') =>
  loadControl(options)({ serverName, url }, context);

describe('loadControl', () => {
  const corp = { allowUrlPatterns: ['https://*.corp.example/*'] };

  it('matches the host glob against the parsed host, never the path', () => {
    expect(decide(corp, 'https://attacker.example/x.corp.example/mcp')).toMatchObject({ decision: 'deny' });
    expect(decide(corp, 'https://attacker.example/?x.corp.example')).toMatchObject({ decision: 'deny' });
    expect(decide(corp, 'https://x.corp.example@attacker.example/mcp')).toMatchObject({ decision: 'deny' });
    expect(decide(corp, 'https://corp.example.attacker.example/mcp')).toMatchObject({ decision: 'deny' });
    expect(decide(corp, 'https://mcp.corp.example/mcp')).toEqual({ decision: 'allow' });
    expect(decide(corp, 'https://MCP.Corp.Example/a/b/c')).toEqual({ decision: 'allow' });
  });

  it('allow narrows: other schemes and non-default ports do not match', () => {
    expect(decide(corp, 'http://mcp.corp.example/mcp')).toMatchObject({ decision: 'deny' });
    expect(decide(corp, 'https://mcp.corp.example:8443/mcp')).toMatchObject({ decision: 'deny' });
    expect(
      decide({ allowUrlPatterns: ['https://*.corp.example:8443/*'] }, 'https://mcp.corp.example:8443/mcp'),
    ).toEqual({ decision: 'allow' });
  });

  it('deny broadens: any port, any path', () => {
    const deny = { denyUrlPatterns: ['https://*.evil.example/*'] };
    expect(decide(deny, 'https://a.evil.example:9999/deep/path')).toMatchObject({ decision: 'deny' });
    expect(decide(deny, 'https://good.example/mcp')).toEqual({ decision: 'allow' });
  });

  it('denies names exactly and by glob', () => {
    const names = { denyNames: ['github'], denyNamePatterns: ['bank*'] };
    expect(decide(names, 'https://x.example/mcp', 'github')).toMatchObject({ decision: 'deny' });
    expect(decide(names, 'https://x.example/mcp', 'banking')).toMatchObject({ decision: 'deny' });
    expect(decide(names, 'https://x.example/mcp', 'weather')).toEqual({ decision: 'allow' });
  });

  it('refuses unparseable and non-http URLs', () => {
    expect(decide({}, 'not a url')).toMatchObject({ decision: 'deny' });
    expect(decide({}, 'file:///etc/passwd')).toMatchObject({ decision: 'deny' });
    expect(decide({}, 'javascript:alert(1)')).toMatchObject({ decision: 'deny' });
  });

  it('rejects malformed patterns when built, as config errors', () => {
    expect(() => loadControl({ allowUrlPatterns: ['*.corp.example'] })).toThrow(/invalid URL pattern/);
    expect(() => loadControl({ denyUrlPatterns: ['https://evil.example:http/*'] })).toThrow(
      expect.objectContaining({ code: 'config-invalid' }),
    );
    // Without the check, picomatch compiles this to a regex that never matches: a deny that fails open.
    expect(() => loadControl({ denyNamePatterns: ['[z-a]*'] })).toThrow(
      expect.objectContaining({ code: 'config-invalid', message: expect.stringMatching(/invalid glob "\[z-a\]\*"/) }),
    );
  });
});

describe('urlPatternProblem', () => {
  it('accepts scheme://host[:port]/path, and every pattern it accepts compiles', () => {
    const good = [
      'https://*.corp.example/*',
      'https://*.corp.example',
      'http://localhost:8080/mcp',
      'https://h:*/a/**',
    ];
    for (const pattern of good) expect(urlPatternProblem(pattern)).toBeUndefined();
    expect(() => loadControl({ allowUrlPatterns: good, denyUrlPatterns: good })).not.toThrow();
  });

  it('names what is wrong, ending with the expected shape', () => {
    expect(urlPatternProblem('*.corp.example')).toBe(
      'invalid URL pattern "*.corp.example": expected scheme://host[:port]/path',
    );
    expect(urlPatternProblem('https:/x.example/*')).toMatch(/expected scheme:\/\/host\[:port\]\/path$/);
    expect(urlPatternProblem('https://x.example:http/*')).toMatch(/the port must be digits or \*/);
    // A user@ or an empty host could never equal a parsed host name.
    expect(urlPatternProblem('https://user@x.example/*')).toMatch(/the host must be a host name glob/);
    expect(urlPatternProblem('https://:443/*')).toMatch(/the host must be a host name glob/);
    expect(urlPatternProblem('https://[z-a].example/*')).toMatch(/invalid glob "\[z-a\]\.example"/);
  });
});

describe('globProblem', () => {
  it('accepts globs picomatch compiles and names the ones it cannot', () => {
    for (const glob of ['bank*', 'github__delete_*', '{a,b}_*', '[a-z]*']) expect(globProblem(glob)).toBeUndefined();
    expect(globProblem('[z-a]')).toBe('invalid glob "[z-a]" (Range out of order in character class)');
    expect(globProblem('{a,b')).toMatch(/^invalid glob "\{a,b" \(/);
  });
});
