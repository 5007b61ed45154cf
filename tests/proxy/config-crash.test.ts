import { existsSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configIn, runCli } from '../credentials/cli-run';

// Issue 10: a malformed load_control URL pattern passed config validation and only threw when
// the proxy built its filters, after the pid file was written: exit 1, a raw stack on stderr and
// a stale pid file.
describe('extensible-mcp CLI on a malformed filter pattern', () => {
  it('a URL pattern without scheme:// is a config error (exit 2, file and JSON path named), not a crash that leaves a pid file', async () => {
    const { folder, configPath } = configIn({
      mcpServers: {},
      filters: { load_control: { allow_url_patterns: ['*.corp.example'] } },
    });
    const result = await runCli(['--config', configPath]);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(configPath);
    expect(result.stderr).toMatch(
      /filters\.load_control\.allow_url_patterns\.0: .*expected scheme:\/\/host\[:port\]\/path/,
    );
    expect(result.stderr).not.toMatch(/^ {4}at /m);
    // No `<config>.pid` (nor anything else) is left beside the config.
    expect(existsSync(`${configPath}.pid`)).toBe(false);
    expect(readdirSync(folder)).toEqual(['config.json']);
  });
});
