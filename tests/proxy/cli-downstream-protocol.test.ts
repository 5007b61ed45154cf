import { resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type ModernHttpFixture, startModernHttpFixture } from '../fixtures/modern-http-fixture-server';
import { type CliProcess, initialize, startCli, writeCliConfig } from '../security/fixtures/cli-process';

// Issue 31 through the real CLI: `protocol` in the config file reaches every downstream
// connection. A server pinned to a version it speaks is connected in it; one pinned to a version it
// does not speak is refused with the setting named, and the proxy serves the others.
let cli: CliProcess | undefined;
let http: ModernHttpFixture | undefined;
afterEach(async () => {
  cli?.child.kill('SIGKILL');
  cli = undefined;
  await http?.close();
  http = undefined;
});

const tsx = (file: string) => ['--import', 'tsx', resolve(file)];

describe('the CLI and each server\'s "protocol" setting', () => {
  it('connects each server in the version it pins or negotiates, and refuses a pin the server does not speak', async () => {
    http = await startModernHttpFixture();
    const config = writeCliConfig({
      mcpServers: {
        modern: {
          command: process.execPath,
          args: tsx('tests/fixtures/modern-stdio-fixture-server.ts'),
          protocol: '2026-07-28',
        },
        remote: { url: http.url },
        old: { command: process.execPath, args: tsx('tests/fixtures/stdio-fixture-server.ts'), protocol: '2026-07-28' },
      },
    });
    cli = startCli(config);
    await initialize(cli);
    await cli.stderrLine(/connected 2 of 3 servers/);
    await cli.stderrLine(/server "modern": connected, MCP 2026-07-28$/);
    await cli.stderrLine(/server "remote": connected, MCP 2026-07-28$/);
    expect(await cli.stderrLine(/server "old" failed to start/)).toContain(
      'server "old" failed to start: Server "old" does not speak MCP 2026-07-28, which its configuration pins ("protocol": "2026-07-28")',
    );

    await cli.request(2, 'tools/call', {
      name: 'search_tools',
      arguments: { query: 'echoes back the message', top_k: 10 },
    });
    const called = await cli.request(3, 'tools/call', {
      name: 'call_tool',
      arguments: { tool_name: 'remote__echo', arguments: { message: 'through the CLI' } },
    });
    expect(called.result).toMatchObject({ content: [{ type: 'text', text: 'echo: through the CLI' }] });
    expect(http.methods).toContain('tools/call');
  });
});
