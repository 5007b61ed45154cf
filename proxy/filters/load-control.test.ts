import { describe, expect, it } from 'vitest';
import { loadControl } from './load-control';

const context = { session: 's' };
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

  it('rejects malformed patterns when built', () => {
    expect(() => loadControl({ allowUrlPatterns: ['*.corp.example'] })).toThrow(/invalid URL pattern/);
  });
});
