/**
 * Issue 11 item 16: the stdio proxy died of SIGABRT at exit after a downstream restart. The
 * restart re-indexes the server's tools, so the embedding model was running an inference in its
 * worker thread when shutdown terminated that thread, and onnxruntime aborted the process. Shutdown
 * now waits for the inference in flight: the process exits 0 whether stopped by SIGTERM or by
 * its client closing stdin. Needs the staged embedding model (`npm run model:stage`).
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type CliProcess,
  callWork,
  initialize,
  recordedStarts,
  stagedModelDir,
  startCli,
  writeCliConfig,
} from './fixtures/cli-process';

let cli: CliProcess | undefined;
afterEach(() => {
  cli?.child.kill('SIGKILL');
  cli = undefined;
});

/** Enough tools that re-indexing them keeps the model busy well past the call's answer. */
const toolCount = 600;

describe.skipIf(!existsSync(stagedModelDir))('stdio proxy exit after a downstream restart', () => {
  it.each(['SIGTERM', 'stdin closed'] as const)(
    'exits 0 on %s while the restarted server is re-indexed',
    async (stop) => {
      const stateDir = mkdtempSync(join(tmpdir(), 'emcp-restart-exit-'));
      const fixture = resolve('tests/security/fixtures/many-tools-stdio-server.ts');
      const config = writeCliConfig({
        mcpServers: {
          // A 2025-11-25 server, pinned: no probe process among the recorded starts (issue 31).
          many: {
            command: process.execPath,
            args: ['--import', 'tsx', fixture, stateDir, String(toolCount)],
            protocol: '2025-11-25',
          },
        },
      });
      cli = startCli(config, { withModel: true });
      await initialize(cli);
      await cli.stderrLine(/connected 1 of 1 servers/);
      await cli.stderrLine(/search is hybrid/);
      const first = await callWork(cli, { id: 2, tool: 'many__work', label: 'first' });
      expect(JSON.stringify(first.result)).toContain('done first');

      // The child dies between calls; the next call restarts it (and re-indexes its tools).
      process.kill(recordedStarts(stateDir)[0] as number, 'SIGKILL');
      await cli.stderrLine(/server "many": connection closed/);
      const second = await callWork(cli, { id: 4, tool: 'many__work', label: 'second' });
      expect(JSON.stringify(second.result)).toContain('done second');
      expect(recordedStarts(stateDir)).toHaveLength(2);

      if (stop === 'SIGTERM') cli.child.kill('SIGTERM');
      else cli.child.stdin.end();
      expect(await cli.exited).toEqual({ code: 0, signal: null });
      expect(cli.stderr()).not.toMatch(/terminate called/);
    },
    90_000,
  );
});
