import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ProxyError } from '../errors';
import { loadTransparentConfig } from './load-transparent-config';
import { DEFAULT_SECRET_MARKERS, parseTransparentConfig } from './transparent-config';

function errorOf(raw: unknown): string {
  try {
    parseTransparentConfig(raw, 'cfg.yaml');
  } catch (error) {
    expect(error).toBeInstanceOf(ProxyError);
    expect(error).toMatchObject({ code: 'config-invalid' });
    return (error as Error).message;
  }
  throw new Error('expected a config error');
}

describe('parseTransparentConfig', () => {
  it('fills defaults like mcp-elicitation-proxy and maps the stdio upstream', () => {
    const config = parseTransparentConfig(
      { upstream: { command: 'node', args: ['server.js'], env: { TOKEN_FILE: '/x' } } },
      'cfg.yaml',
    );
    expect(config).toMatchObject({
      source: 'cfg.yaml',
      proxy: { name: 'mcp-elicitation-proxy' },
      upstream: { kind: 'stdio', command: 'node', args: ['server.js'], env: { TOKEN_FILE: '/x' } },
      elicitation: { enabled: true, fallbackOnUnsupported: 'structured_error', timeoutMs: 600_000 },
      policies: {
        schemaRequired: { enabled: true },
        sensitiveRequired: {
          enabled: true,
          nameMarkers: DEFAULT_SECRET_MARKERS,
          schemaMarkers: DEFAULT_SECRET_MARKERS,
        },
      },
      tools: {},
    });
  });

  it('keeps tools policy, elicit copy, ambiguous_if and confirm_if in the model', () => {
    const config = parseTransparentConfig(
      {
        upstream: { url: 'https://mcp.example/mcp' },
        tools: {
          search: {
            required: ['query'],
            elicit: { message: 'What to search?', fields: { query: { type: 'string', description: 'Search terms' } } },
            ambiguous_if: { field: 'query', query_min_length: 3, generic_terms: ['stuff'] },
            confirm_if: { always: true },
          },
        },
      },
      'cfg.yaml',
    );
    expect(config.upstream).toEqual({ kind: 'http', url: 'https://mcp.example/mcp' });
    expect(config.tools.search).toEqual({
      required: ['query'],
      elicit: { message: 'What to search?', fields: { query: { type: 'string', description: 'Search terms' } } },
      ambiguousIf: { field: 'query', queryMinLength: 3, genericTerms: ['stuff'] },
      confirmIf: { always: true },
    });
  });

  it('keeps who confirms with a passkey, and refuses an empty list of them', () => {
    const tools = (confirmIf: unknown) =>
      parseTransparentConfig(
        { upstream: { url: 'https://mcp.example/mcp' }, tools: { cancel: { confirm_if: confirmIf } } },
        'cfg.yaml',
      );
    expect(tools({ always: true, passkey: ['child'] }).tools.cancel?.confirmIf).toEqual({
      always: true,
      passkey: ['child'],
    });
    expect(() => tools({ always: true, passkey: [] })).toThrow(/name at least one role who confirms with a passkey/);
  });

  it.each([
    ['neither url nor command', { upstream: {} }, 'cfg.yaml: upstream: set exactly one of upstream.url'],
    ['both url and command', { upstream: { url: 'http://a/mcp', command: 'x' } }, 'set exactly one of upstream.url'],
    [
      'args without command',
      { upstream: { url: 'http://a/mcp', args: ['x'] } },
      'upstream.args: args is allowed only together with upstream.command',
    ],
    [
      'env without command',
      { upstream: { url: 'http://a/mcp', env: { A: 'b' } } },
      'upstream.env: env is allowed only together',
    ],
    ['blank command', { upstream: { command: '  ' } }, 'upstream.command: must not be blank'],
    ['blank url', { upstream: { url: '' } }, 'upstream.url: must not be blank'],
    ['non-http url', { upstream: { url: 'file:///etc/passwd' } }, 'upstream.url: expected an http(s) URL'],
    ['blank argument', { upstream: { command: 'x', args: ['ok', ''] } }, 'upstream.args[1]: must not be blank'],
    [
      'numeric env value',
      { upstream: { command: 'x', env: { PORT: 8080 } } },
      'upstream.env.PORT: expected a string value (quote numbers',
    ],
    [
      'null env value',
      { upstream: { command: 'x', env: { PORT: null } } },
      'upstream.env.PORT: expected a string value',
    ],
    ['missing upstream', {}, 'upstream: is required'],
    ['unknown key', { upstream: { command: 'x' }, upstreams: {} }, '(top level): Unrecognized key: "upstreams"'],
    [
      'non-primitive field type',
      { upstream: { command: 'x' }, tools: { t: { elicit: { fields: { f: { type: 'object' } } } } } },
      'tools.t.elicit.fields.f.type: expected one of string, number, integer, boolean',
    ],
    [
      'other fallback',
      { upstream: { command: 'x' }, elicitation: { fallback_on_unsupported: 'ask_in_chat' } },
      'elicitation.fallback_on_unsupported: expected "structured_error"',
    ],
    [
      'string for boolean',
      { upstream: { command: 'x' }, elicitation: { enabled: 'yes' } },
      'elicitation.enabled: expected true or false',
    ],
    [
      'required not a list',
      { upstream: { command: 'x' }, tools: { t: { required: 'query' } } },
      'tools.t.required: expected a list of field names',
    ],
    ['a list at top level', [1, 2], '(top level): expected a YAML mapping'],
    [
      'a protocol the proxy does not speak',
      { upstream: { command: 'x', protocol: '2025-06-18' } },
      'upstream.protocol: expected one of "2026-07-28", "2025-11-25", "auto" (the MCP protocol version to speak to the upstream), got string "2025-06-18"',
    ],
  ])('rejects %s with a message naming the file and path', (_label, raw, expected) => {
    const message = errorOf(raw);
    expect(message).toContain('cfg.yaml');
    expect(message).toContain(expected);
  });
});

describe('loadTransparentConfig', () => {
  async function write(name: string, text: string): Promise<string> {
    const folder = await mkdtemp(join(tmpdir(), 'transparent-config-'));
    const path = join(folder, name);
    await writeFile(path, text);
    return path;
  }

  it('reads upstream.protocol for either kind of upstream, unquoted versions included; absent, none (auto)', async () => {
    const stdio = await write('stdio.yaml', 'upstream:\n  command: node\n  protocol: 2026-07-28\n');
    await expect(loadTransparentConfig(stdio)).resolves.toMatchObject({
      upstream: { kind: 'stdio', command: 'node', protocol: '2026-07-28' },
    });
    const http = await write('http.yaml', 'upstream:\n  url: https://mcp.example/mcp\n  protocol: "2025-11-25"\n');
    expect((await loadTransparentConfig(http)).upstream).toEqual({
      kind: 'http',
      url: 'https://mcp.example/mcp',
      protocol: '2025-11-25',
    });
    const plain = await write('plain.yaml', 'upstream:\n  url: https://mcp.example/mcp\n');
    expect((await loadTransparentConfig(plain)).upstream).not.toHaveProperty('protocol');
  });

  it('loads YAML', async () => {
    const path = await write('ok.yaml', 'upstream:\n  command: node\n  args: ["s.js"]\n');
    await expect(loadTransparentConfig(path)).resolves.toMatchObject({ source: path, upstream: { kind: 'stdio' } });
  });

  it('says a missing file is missing', async () => {
    await expect(loadTransparentConfig(join(tmpdir(), 'no-such-dir-x', 'c.yaml'))).rejects.toMatchObject({
      code: 'config-not-found',
      message: expect.stringContaining('configuration file not found'),
    });
  });

  it('reports broken YAML and duplicate keys with the file name', async () => {
    const broken = await write('broken.yaml', 'upstream: [unclosed\n');
    await expect(loadTransparentConfig(broken)).rejects.toThrow(`${broken}: invalid YAML`);
    const duplicate = await write('dup.yaml', 'upstream:\n  command: a\nupstream:\n  command: b\n');
    await expect(loadTransparentConfig(duplicate)).rejects.toThrow(/dup\.yaml: invalid YAML.*unique/s);
  });

  it('rejects an empty file', async () => {
    const empty = await write('empty.yaml', '');
    await expect(loadTransparentConfig(empty)).rejects.toThrow('expected a YAML mapping');
  });

  it('resolves upstream.env values that are exactly $NAME: the .env beside the file first, then the environment', async () => {
    const path = await write(
      'env.yaml',
      'upstream:\n  command: node\n  env:\n    API_KEY: $API_KEY\n    REGION: $REGION\n    LITERAL: "a $NOT reference"\n',
    );
    await writeFile(join(dirname(path), '.env'), 'API_KEY=from-dotenv\n');
    const config = await loadTransparentConfig(path, { API_KEY: 'from-environment', REGION: 'eu' });
    expect(config.upstream).toMatchObject({
      kind: 'stdio',
      env: { API_KEY: 'from-dotenv', REGION: 'eu', LITERAL: 'a $NOT reference' },
    });
  });

  it('refuses an upstream.env reference that is set nowhere, naming the file and the key', async () => {
    const path = await write('unset.yaml', 'upstream:\n  command: node\n  env:\n    TOKEN: $NOT_SET_ANYWHERE\n');
    await expect(loadTransparentConfig(path, {})).rejects.toMatchObject({
      code: 'config-invalid',
      message: `${path}: upstream.env.TOKEN: $NOT_SET_ANYWHERE is not set in the .env beside the config nor in the environment.`,
    });
  });
});
