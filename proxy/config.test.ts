import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultConfigPaths, loadConfig, resolveConfigPath } from './config';
import { gatewayOptionsFromConfig } from './from-config';

function writeConfig(config: unknown, extra: Record<string, string> = {}): string {
  const folder = mkdtempSync(join(tmpdir(), 'emcp-config-'));
  const path = join(folder, 'config.json');
  writeFileSync(path, typeof config === 'string' ? config : JSON.stringify(config));
  for (const [name, content] of Object.entries(extra)) writeFileSync(join(folder, name), content);
  return path;
}

describe('loadConfig', () => {
  it('accepts stdio and url servers and resolves rego_policy against the config folder', () => {
    const path = writeConfig({
      mcpServers: { files: { command: 'node', args: ['x.js'] }, remote: { url: 'https://mcp.example.com/mcp' } },
      filters: { rego_policy: 'policies/deny.rego', access_control: { deny: ['files__delete'] } },
    });
    const config = loadConfig(path);
    expect(config.servers.files).toEqual({ command: 'node', args: ['x.js'] });
    expect(config.filters.rego_policy).toBe(join(path, '..', 'policies', 'deny.rego'));
    expect(config.filters.access_control).toEqual({ deny: ['files__delete'], deny_patterns: [] });
  });

  it('reads filters.approval_required into rules for the filter, and refuses a rule without roles', () => {
    const rules = [{ tool: 'pizza__cancel_*', roles: ['child'] }];
    const config = loadConfig(writeConfig({ mcpServers: {}, filters: { approval_required: rules } }));
    expect(gatewayOptionsFromConfig(config).approvalRequired).toEqual({ rules });
    const path = writeConfig({ mcpServers: {}, filters: { approval_required: [{ tool: 'x', roles: [] }] } });
    expect(() => loadConfig(path)).toThrow(
      `${path}: invalid config:\n  filters.approval_required.0.roles: expected at least one role who must approve`,
    );
  });

  it('turns the elicitation filter on only for filters.elicit_missing: true, and refuses a value that is not a boolean', () => {
    const on = gatewayOptionsFromConfig(loadConfig(writeConfig({ mcpServers: {}, filters: { elicit_missing: true } })));
    expect(on.elicitation?.name).toBe('elicitation');
    for (const filters of [{}, { elicit_missing: false }]) {
      expect(
        gatewayOptionsFromConfig(loadConfig(writeConfig({ mcpServers: {}, filters }))).elicitation,
      ).toBeUndefined();
    }
    const path = writeConfig({ mcpServers: {}, filters: { elicit_missing: 'yes' } });
    expect(() => loadConfig(path)).toThrow(/filters\.elicit_missing: Invalid input: expected boolean/);
  });

  it('refuses both command and url, naming the file and the path', () => {
    const path = writeConfig({ mcpServers: { both: { command: 'node', url: 'https://x.example/mcp' } } });
    expect(() => loadConfig(path)).toThrow(
      `${path}: invalid config:\n  mcpServers.both: expected exactly one of "command" (stdio) or "url" (Streamable HTTP)`,
    );
  });

  it('refuses unknown keys at any level', () => {
    expect(() => loadConfig(writeConfig({ mcpServers: {}, filterz: {} }))).toThrow(
      /\(root\): Unrecognized key: "filterz"/,
    );
    expect(() => loadConfig(writeConfig({ mcpServers: { a: { command: 'x', cwd: '/' } } }))).toThrow(
      /mcpServers\.a: Unrecognized key: "cwd"/,
    );
    expect(() => loadConfig(writeConfig({ mcpServers: {}, filters: { access_control: { denny: [] } } }))).toThrow(
      /filters\.access_control: Unrecognized key: "denny"/,
    );
  });

  it('takes a per-server protocol and maps it onto the server spec; absent, the spec has none (auto)', () => {
    const config = loadConfig(
      writeConfig({
        mcpServers: {
          files: { command: 'node', protocol: '2025-11-25' },
          remote: { url: 'https://mcp.example.com/mcp', protocol: '2026-07-28' },
          either: { url: 'https://other.example.com/mcp', protocol: 'auto' },
          plain: { command: 'node' },
        },
      }),
    );
    expect(gatewayOptionsFromConfig(config).servers).toEqual({
      files: { kind: 'stdio', command: 'node', protocol: '2025-11-25' },
      remote: { kind: 'http', url: 'https://mcp.example.com/mcp', protocol: '2026-07-28' },
      either: { kind: 'http', url: 'https://other.example.com/mcp', protocol: 'auto' },
      plain: { kind: 'stdio', command: 'node' },
    });
  });

  it('refuses a protocol that is not a version the proxy speaks, naming the path and the choices', () => {
    const path = writeConfig({
      mcpServers: { remote: { url: 'https://mcp.example.com/mcp', protocol: '2025-06-18' } },
    });
    expect(() => loadConfig(path)).toThrow(
      `${path}: invalid config:\n  mcpServers.remote.protocol: expected one of "2026-07-28", "2025-11-25", "auto" (the MCP protocol version to speak to this server), got "2025-06-18"`,
    );
  });

  it('refuses server names with "__"', () => {
    expect(() => loadConfig(writeConfig({ mcpServers: { a__b: { command: 'x' } } }))).toThrow(
      /mcpServers\.a__b: .*"__"/,
    );
  });

  it('refuses invalid JSON and non-http URLs', () => {
    expect(() => loadConfig(writeConfig('{ nope'))).toThrow(/invalid JSON/);
    expect(() => loadConfig(writeConfig({ mcpServers: { a: { url: 'file:///etc/passwd' } } }))).toThrow(
      /mcpServers\.a\.url: expected an http\(s\) URL/,
    );
  });

  it('refuses a URL pattern that is not scheme://host[:port]/path, naming the JSON path (issue 10: it crashed the CLI)', () => {
    const path = writeConfig({
      mcpServers: {},
      filters: {
        load_control: {
          allow_url_patterns: ['https://*.corp.example/*', '*.corp.example'],
          deny_url_patterns: ['https://evil.example:http/*'],
        },
      },
    });
    expect(() => loadConfig(path)).toThrow(
      `${path}: invalid config:\n` +
        '  filters.load_control.deny_url_patterns.0: invalid URL pattern "https://evil.example:http/*": the port must be digits or *; expected scheme://host[:port]/path\n' +
        '  filters.load_control.allow_url_patterns.1: invalid URL pattern "*.corp.example": expected scheme://host[:port]/path',
    );
  });

  it('refuses name globs picomatch cannot compile, which would otherwise never match and fail open', () => {
    const path = writeConfig({
      mcpServers: {},
      filters: {
        access_control: { deny_patterns: ['github__delete_*', '[z-a]*'] },
        load_control: { deny_name_patterns: ['{bank,pay'] },
      },
    });
    expect(() => loadConfig(path)).toThrow(
      /filters\.access_control\.deny_patterns\.1: invalid glob "\[z-a\]\*".*\n {2}filters\.load_control\.deny_name_patterns\.0: invalid glob "\{bank,pay"/,
    );
  });

  it('accepts well-formed patterns as written', () => {
    const config = loadConfig(
      writeConfig({
        mcpServers: {},
        filters: {
          access_control: { deny_patterns: ['github__delete_*'] },
          load_control: {
            deny_name_patterns: ['bank*'],
            deny_url_patterns: ['https://*.evil.example:*/*'],
            allow_url_patterns: ['https://*.corp.example/*', 'http://localhost:8080'],
          },
        },
      }),
    );
    expect(config.filters.load_control).toEqual({
      deny_names: [],
      deny_name_patterns: ['bank*'],
      deny_url_patterns: ['https://*.evil.example:*/*'],
      allow_url_patterns: ['https://*.corp.example/*', 'http://localhost:8080'],
    });
  });

  it('resolves $VAR env values from the .env beside the config first, then the environment', () => {
    const path = writeConfig(
      { mcpServers: { a: { command: 'x', env: { TOKEN: '$API_TOKEN', OTHER: '$FROM_ENV', LITERAL: 'a$b' } } } },
      { '.env': 'API_TOKEN=from-dotenv\n' },
    );
    const config = loadConfig(path, { API_TOKEN: 'from-process', FROM_ENV: 'process-value' });
    expect(config.servers.a).toMatchObject({ env: { TOKEN: 'from-dotenv', OTHER: 'process-value', LITERAL: 'a$b' } });
    expect(() => loadConfig(path, {})).toThrow(/mcpServers\.a\.env\.OTHER: \$FROM_ENV is not set/);
  });
});

describe('resolveConfigPath', () => {
  it('prefers the flag, then the environment variable, then the defaults in order', () => {
    const flag = writeConfig({ mcpServers: {} });
    const env = writeConfig({ mcpServers: {} });
    const second = writeConfig({ mcpServers: {} });
    expect(resolveConfigPath({ flag, env })).toBe(flag);
    expect(resolveConfigPath({ env })).toBe(env);
    expect(resolveConfigPath({ candidates: ['/nonexistent/config.json', second] })).toBe(second);
  });

  it('never falls back when an explicit path is missing', () => {
    expect(() =>
      resolveConfigPath({ flag: '/nonexistent/c.json', candidates: [writeConfig({ mcpServers: {} })] }),
    ).toThrow(/\/nonexistent\/c\.json: config file not found \(given by --config\)/);
    expect(() => resolveConfigPath({ env: '/nonexistent/e.json' })).toThrow(/given by EXTENSIBLE_MCP_CONFIG/);
  });

  it('lists the platform defaults', () => {
    expect(defaultConfigPaths({ home: '/h', platform: 'darwin', cwd: '/w' })).toEqual([
      '/h/Library/Application Support/extensible-mcp/config.json',
      '/h/.config/extensible-mcp/config.json',
      '/w/config.json',
    ]);
    expect(defaultConfigPaths({ home: '/h', platform: 'linux', cwd: '/w' })).toHaveLength(2);
  });
});
