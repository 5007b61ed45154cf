import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createGateway, type DownstreamProtocol, type Gateway } from '../../proxy/index';
import { waitableLogger } from '../gateway/support';

// A downstream that never finishes initialize, and a gateway closed while it connects (a
// SIGTERM right after start): close() must stop that child at once, and no later connect may
// start another. Before, the half-made connection kept its child until the connect timeout.
// Under `auto` the child still connecting is the SDK's `server/discover` probe sibling (issue 31),
// whose stderr is discarded: every process appends its pid to a file instead.
const hangingChild = `require('node:fs').appendFileSync(process.argv[1], process.pid + '\\n');
process.stderr.write('ready ' + process.pid + '\\n'); process.stdin.resume();
process.stdin.on('end', () => undefined); process.on('SIGTERM', () => undefined);`;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pids recorded so far, once at least one is there (polled on the file: no other signal exists). */
async function recordedPids(file: string): Promise<number[]> {
  for (;;) {
    const pids = (() => {
      try {
        return readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map(Number);
      } catch {
        return [];
      }
    })();
    if (pids.length > 0) return pids;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const opened: Gateway[] = [];
const pids: number[] = [];
const folders: string[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((gateway) => gateway.close()));
  for (const pid of pids.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL');
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe('closing the gateway while a downstream is still connecting', () => {
  it.each<DownstreamProtocol>(['2025-11-25', 'auto'])(
    'stops the half-connected child at once instead of leaving it to the connect timeout (protocol %s)',
    async (protocol) => {
      const folder = mkdtempSync(join(tmpdir(), 'emcp-hung-'));
      folders.push(folder);
      const pidFile = join(folder, 'pids');
      const logger = waitableLogger();
      const gateway = createGateway({
        embeddings: false,
        logger,
        connectTimeoutMs: 10 * 60_000,
        servers: {
          hung: { kind: 'stdio', command: process.execPath, args: ['-e', hangingChild, pidFile], protocol },
        },
      });
      opened.push(gateway);
      const started = gateway.start();
      const [pid] = await recordedPids(pidFile);
      if (pid === undefined) throw new Error('no child recorded');
      pids.push(pid);
      expect(alive(pid)).toBe(true);
      await gateway.close();
      expect(alive(pid)).toBe(false);
      expect((await started).failed.map((failure) => failure.name)).toEqual(['hung']);
      // Nothing was started after close(): the probe's verdict never led to a session child.
      expect(await recordedPids(pidFile)).toEqual([pid]);
    },
  );
});
