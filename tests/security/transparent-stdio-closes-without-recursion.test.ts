/**
 * Issue 31: transparent mode over stdio, when the client closed its end, recursed in its close
 * handlers (`RangeError: Maximum call stack size exceeded`, repeated on stderr) and exited with
 * code 1. End of input, or one SIGTERM or SIGINT, is one orderly shutdown: exit code 0, nothing
 * recursive on stderr.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { EVERYTHING_ENTRY } from '../transparent/helpers';
import { type CliProcess, initialize, startCli } from './fixtures/cli-process';

let cli: CliProcess | undefined;
afterEach(() => {
  cli?.child.kill('SIGKILL');
  cli = undefined;
});

function transparentConfig(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'emcp-close-')), 'proxy.yaml');
  writeFileSync(
    path,
    `upstream:\n  command: ${JSON.stringify(process.execPath)}\n  args: [${JSON.stringify(EVERYTHING_ENTRY)}, "stdio"]\n`,
  );
  return path;
}

describe('transparent mode over stdio, when the client closes its end', () => {
  it('exits with code 0 and never recurses in its close handlers', async () => {
    cli = startCli(transparentConfig());
    await initialize(cli);
    cli.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    const answer = await cli.request(2, 'tools/call', { name: 'echo', arguments: { message: 'before close' } });
    expect(JSON.stringify(answer.result)).toContain('Echo: before close');

    cli.child.stdin.end();
    expect(await cli.exited).toEqual({ code: 0, signal: null });
    expect(cli.stderr()).not.toMatch(/RangeError|Maximum call stack/);
  });

  it.each(['SIGTERM', 'SIGINT'] as const)('one %s, stdin still open, is the same orderly exit', async (signal) => {
    cli = startCli(transparentConfig());
    await initialize(cli);
    const answer = await cli.request(2, 'tools/call', { name: 'echo', arguments: { message: 'before signal' } });
    expect(JSON.stringify(answer.result)).toContain('Echo: before signal');

    cli.child.kill(signal);
    expect(await cli.exited).toEqual({ code: 0, signal: null });
    expect(cli.stderr()).not.toMatch(/RangeError|Maximum call stack/);
  });
});
