/**
 * Issue 31: a stateful Streamable HTTP downstream that restarted was never reached again: every
 * later call failed with the server's "No valid session ID provided" until the proxy restarted.
 * A request the server refused for want of a session never ran, so the proxy opens a new session
 * and sends it again, once; a call that was in flight when the server died may have run, so it
 * is reported as outcome unknown and never replayed. Real server-everything processes, restarted
 * on one loopback port, behind a byte-counting forwarder of the test's own.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server, Socket } from 'node:net';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../proxy/index';
import { freePort } from '../e2e/support/app-server';
import { cleanupStack, startedGateway, waitableLogger } from '../gateway/support';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const entry = 'node_modules/@modelcontextprotocol/server-everything/dist/transports/streamableHttp.js';

/** Starts server-everything over Streamable HTTP on `port`; resolves once it listens. */
async function startEverything(port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [entry], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  cleanups.push(() => child.kill('SIGKILL'));
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      if (seen.includes('listening on port')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`server-everything exited (${code}): ${seen}`)));
  });
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

/** A loopback TCP forwarder that counts the requests naming `marker` and says when one arrives. */
async function forwarder(target: number, marker: string) {
  let seen = 0;
  const waiting: (() => void)[] = [];
  const server: Server = createServer((inbound) => {
    const outbound = new Socket();
    outbound.connect(target, '127.0.0.1');
    inbound.on('data', (chunk: Buffer) => {
      if (chunk.toString('utf8').includes(marker)) {
        seen += 1;
        for (const resolve of waiting.splice(0)) resolve();
      }
    });
    inbound.pipe(outbound).pipe(inbound);
    const end = () => {
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on('error', end);
    outbound.on('error', end);
    inbound.on('close', end);
    outbound.on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    count: () => seen,
    next: () => new Promise<void>((resolve) => waiting.push(resolve)),
  };
}

const textOf = (result: CallToolResult) =>
  result.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
const context = { principal: { id: 'test' }, scope: { kind: 'session' as const, id: 'restart' } };

async function gatewayAt(url: string, callTimeoutMs = 60_000): Promise<Gateway> {
  const gateway = await startedGateway(cleanups, {
    servers: { everything: { kind: 'http', url } },
    callTimeoutMs,
    logger: waitableLogger(),
  });
  await gateway.search({ query: 'echo trigger long running operation', topK: 50 }, context);
  return gateway;
}

describe('a Streamable HTTP downstream that restarts', () => {
  it('is reached again by the next call: the refused request never ran, so it is sent once more', async () => {
    const port = await freePort();
    const first = await startEverything(port);
    const gateway = await gatewayAt(`http://127.0.0.1:${port}/mcp`);
    const echo = { tool: 'everything__echo', arguments: { message: 'before' } };
    expect(textOf(await gateway.call(echo, context))).toBe('Echo: before');

    await stop(first);
    await startEverything(port);
    const after = await gateway.call({ tool: 'everything__echo', arguments: { message: 'after' } }, context);
    expect(after.isError).toBeUndefined();
    expect(textOf(after)).toBe('Echo: after');
  });

  it('reports a call in flight when it died as outcome unknown, and never replays it', async () => {
    const port = await freePort();
    const first = await startEverything(port);
    const forward = await forwarder(port, 'trigger-long-running-operation');
    const gateway = await gatewayAt(forward.url, 8_000);
    const arrived = forward.next();
    const slow = gateway.call(
      { tool: 'everything__trigger-long-running-operation', arguments: { duration: 60, steps: 60 } },
      context,
    );
    await arrived;
    await stop(first);
    await startEverything(port);

    const inDoubt = await slow;
    expect(inDoubt.isError).toBe(true);
    expect(textOf(inDoubt)).toMatch(/outcome is unknown|may or may not have run/);
    expect(textOf(await gateway.call({ tool: 'everything__echo', arguments: { message: 'next' } }, context))).toBe(
      'Echo: next',
    );
    expect(forward.count()).toBe(1);
  });
});
