import { describe, expect, it } from 'vitest';
import { sameServerUrl } from './same-server-url';

describe('sameServerUrl', () => {
  it.each([
    ['https://mcp.notion.com/mcp', 'https://mcp.notion.com/mcp'],
    ['https://mcp.notion.com/mcp', 'HTTPS://MCP.Notion.COM/mcp'],
    ['https://mcp.notion.com/mcp', 'https://mcp.notion.com/mcp/'],
    ['https://mcp.notion.com', 'https://mcp.notion.com/'],
    ['https://mcp.notion.com:443/mcp', 'https://mcp.notion.com/mcp'],
  ])('binds %s to %s', (configured, connection) => {
    expect(sameServerUrl(configured, connection)).toBe(true);
  });

  it.each([
    ['another host', 'https://mcp.notion.com/mcp', 'https://attacker.example/mcp'],
    ['a look-alike host (Cyrillic o)', 'https://mcp.notion.com/mcp', 'https://mcp.n\u043etion.com/mcp'],
    ['a suffix host', 'https://mcp.notion.com/mcp', 'https://mcp.notion.com.attacker.example/mcp'],
    ['another scheme', 'https://mcp.notion.com/mcp', 'http://mcp.notion.com/mcp'],
    ['another port', 'https://mcp.notion.com/mcp', 'https://mcp.notion.com:8443/mcp'],
    ['another path', 'https://mcp.notion.com/mcp', 'https://mcp.notion.com/other/mcp'],
    ['path case', 'https://mcp.notion.com/mcp', 'https://mcp.notion.com/MCP'],
    ['an added query', 'https://mcp.notion.com/mcp', 'https://mcp.notion.com/mcp?next=https://attacker.example'],
    ['added userinfo', 'https://mcp.notion.com/mcp', 'https://user@mcp.notion.com/mcp'],
    ['two trailing slashes', 'https://mcp.notion.com/mcp', 'https://mcp.notion.com/mcp//'],
    ['a non-http scheme', 'https://mcp.notion.com/mcp', 'file:///mcp'],
    ['an unparsable URL', 'https://mcp.notion.com/mcp', 'not a url'],
    ['an unparsable configured URL', 'not a url', 'not a url'],
  ])('does not bind %s', (_name, configured, connection) => {
    expect(sameServerUrl(configured, connection)).toBe(false);
  });
});
