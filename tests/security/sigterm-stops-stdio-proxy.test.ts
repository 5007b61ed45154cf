/**
 * Issue 11 item 8: one SIGTERM used to close the downstreams, which the still-open stdio session
 * then respawned, and the proxy kept serving until a second SIGTERM. One SIGTERM or SIGINT is an
 * orderly shutdown: the downstream child is stopped (and not respawned) and the proxy exits 0,
 * with its client still connected.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type CliProcess,
  callWork,
  initialize,
  isRunning,
  mortalConfig,
  recordedStarts,
  startCli,
} from './fixtures/cli-process';

let cli: CliProcess | undefined;
afterEach(() => {
  cli?.child.kill('SIGKILL');
  cli = undefined;
});

describe('stdio proxy and one termination signal', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('one %s stops it with exit code 0 and no respawned child', async (signal) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'emcp-sigterm-'));
    cli = startCli(mortalConfig(stateDir));
    await initialize(cli);
    await cli.stderrLine(/connected 1 of 1 servers/);
    const answer = await callWork(cli, { id: 2, tool: 'mortal__work', label: 'before-signal' });
    expect(JSON.stringify(answer.result)).toContain('done before-signal');
    const [child] = recordedStarts(stateDir);

    // Once, with stdin still open: the client has not gone away.
    cli.child.kill(signal);
    expect(await cli.exited).toEqual({ code: 0, signal: null });

    expect(recordedStarts(stateDir)).toEqual([child]);
    expect(isRunning(child as number)).toBe(false);
  });
});
