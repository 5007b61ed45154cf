import { afterEach, describe, expect, it } from 'vitest';
import { createGateway, type Gateway } from '../../proxy/index';
import { waitableLogger } from '../gateway/support';

// A downstream that never finishes initialize, and a gateway closed while it connects (a
// SIGTERM right after start): close() must stop that child at once, and no later connect may
// start another. Before, the half-made connection kept its child until the connect timeout.
const hangingChild = `process.stderr.write('ready ' + process.pid + '\\n'); process.stdin.resume();
process.stdin.on('end', () => undefined); process.on('SIGTERM', () => undefined);`;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const opened: Gateway[] = [];
const pids: number[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((gateway) => gateway.close()));
  for (const pid of pids.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL');
});

describe('closing the gateway while a downstream is still connecting', () => {
  it('stops the half-connected child at once instead of leaving it to the connect timeout', async () => {
    const logger = waitableLogger();
    const gateway = createGateway({
      embeddings: false,
      logger,
      connectTimeoutMs: 10 * 60_000,
      servers: { hung: { kind: 'stdio', command: process.execPath, args: ['-e', hangingChild] } },
    });
    opened.push(gateway);
    const started = gateway.start();
    const ready = await logger.waitFor('ready ');
    const pid = Number(ready.split('ready ')[1]);
    pids.push(pid);
    expect(alive(pid)).toBe(true);
    await gateway.close();
    expect(alive(pid)).toBe(false);
    expect((await started).failed.map((failure) => failure.name)).toEqual(['hung']);
    expect(logger.lines.filter((line) => line.includes('ready '))).toHaveLength(1);
  });
});
