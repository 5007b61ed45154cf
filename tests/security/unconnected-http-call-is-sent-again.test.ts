/**
 * Issue 31: after the shop container restarted, the app's next order sometimes did not complete.
 * The app's lookup of the shop's name took longer than undici's 10 s connect timeout, the call's
 * `fetch failed` before anything was sent, and the proxy reported it as "may have run" (outcome
 * unknown), which nothing retries. A request that never connected never ran: it is sent once more,
 * and if that does not connect either, the server is reported unavailable, never in doubt. A
 * call that was sent and then lost stays in doubt and is never replayed
 * (restarted-http-downstream-is-reached-again.test.ts). Real SDK servers on loopback, behind a
 * port of the test's own that it shuts (refusing connections) and opens again once the proxy has
 * seen its call refused.
 */
import { createServer, type Server, Socket } from 'node:net';
import type { CallToolResult, Client } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { connectInMemory, type DownstreamSpec } from '../../proxy/index';
import { startHttpFixture } from '../fixtures/http-fixture-server';
import { startModernHttpFixture } from '../fixtures/modern-http-fixture-server';
import { cleanupStack, startedGateway, waitableLogger } from '../gateway/support';
import { callTool, searchNames, textOf } from '../proxy/helpers';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

/**
 * A loopback port forwarding to `target().port`. `shut()` stops listening (a connection is then
 * refused) and ends every open connection, resolving once the peer has closed its side too, so
 * the proxy holds no connection of the old server; `open()` listens on the same port again.
 */
async function gate(target: () => { readonly port: number }) {
  const sockets = new Set<Socket>();
  let listener: Server | undefined;
  let port = 0;
  const open = async () => {
    const server = createServer((inbound) => {
      sockets.add(inbound);
      const outbound = new Socket();
      outbound.connect(target().port, '127.0.0.1');
      inbound.pipe(outbound).pipe(inbound);
      outbound.on('error', () => inbound.end());
      outbound.on('close', () => inbound.end());
      inbound.on('error', () => outbound.destroy());
      inbound.on('close', () => {
        sockets.delete(inbound);
        outbound.destroy();
      });
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    const address = server.address();
    port = typeof address === 'object' && address ? address.port : 0;
    listener = server;
  };
  const shut = async () => {
    const closing = new Promise<void>((resolve) => (listener ? listener.close(() => resolve()) : resolve()));
    listener = undefined;
    await Promise.all(
      [...sockets].map((socket) => {
        const closed = new Promise((resolve) => socket.once('close', resolve));
        socket.end();
        return closed;
      }),
    );
    await closing;
  };
  await open();
  cleanups.push(shut);
  return { url: () => `http://127.0.0.1:${port}/mcp`, open, shut };
}

/** The proxy's log line saying the call was refused, or, if the call answered first, what it answered. */
function refusedFirst(logger: ReturnType<typeof waitableLogger>, pending: Promise<CallToolResult>): Promise<string> {
  const answered = pending.then((result) => `answered before any refusal was logged: ${textOf(result)}`);
  return Promise.race([logger.waitFor('server "fx": "echo" never connected'), answered]);
}

/** A search-mode session of a gateway in front of `spec` (named `fx`), with `fx__echo` found. */
async function sessionFor(spec: DownstreamSpec) {
  const logger = waitableLogger();
  const gateway = await startedGateway(cleanups, { servers: { fx: spec }, logger });
  const client: Client = await connectInMemory(gateway, { principal: { id: 'test' } });
  cleanups.push(() => client.close());
  expect(await searchNames(client, 'echoes back the message')).toContain('fx__echo');
  return { client, logger };
}

describe('an HTTP call that never connected', () => {
  it('2026-07-28: is sent once more and served by the server that came back on the same port', async () => {
    const fixture = await startModernHttpFixture();
    cleanups.push(() => fixture.close());
    const port = await gate(() => fixture);
    const { client, logger } = await sessionFor({ kind: 'http', url: port.url() });
    expect(textOf(await callTool(client, 'fx__echo', { message: 'before' }))).toBe('echo: before');
    await port.shut();

    const pending = callTool(client, 'fx__echo', { message: 'after' });
    expect(await refusedFirst(logger, pending)).toMatch(/^server "fx": "echo" never connected \(ECONNREFUSED: /);
    await port.open();

    const after = await pending;
    expect(after.isError).toBeUndefined();
    expect(textOf(after)).toBe('echo: after');
    // Run once: the refused attempt reached nobody.
    expect(fixture.state.calls.filter((call) => call.tool === 'echo')).toEqual([
      { tool: 'echo', args: { message: 'before' } },
      { tool: 'echo', args: { message: 'after' } },
    ]);
    expect(logger.lines.some((line) => line.includes('connection lost during'))).toBe(false);
  });

  it('2025-11-25: is sent once more, and the session the restarted server lost is opened afresh', async () => {
    let current = await startHttpFixture();
    cleanups.push(() => current.close());
    const port = await gate(() => ({ port: Number(new URL(current.url).port) }));
    const { client, logger } = await sessionFor({ kind: 'http', url: port.url(), protocol: '2025-11-25' });
    expect(textOf(await callTool(client, 'fx__echo', { message: 'before' }))).toBe('echo: before');
    await port.shut();
    await current.close();
    // The restarted server: a new process with none of the old sessions.
    const restarted = await startHttpFixture();
    current = restarted;

    const pending = callTool(client, 'fx__echo', { message: 'after' });
    expect(await refusedFirst(logger, pending)).toMatch(/^server "fx": "echo" never connected \(ECONNREFUSED: /);
    await port.open();

    const after = await pending;
    expect(after.isError).toBeUndefined();
    expect(textOf(after)).toBe('echo: after');
    expect(restarted.calls).toEqual([{ tool: 'echo', args: { message: 'after' } }]);
    expect(logger.lines.some((line) => line.includes('its session is gone'))).toBe(true);
  });

  it('is reported unavailable, with its cause logged, when the server stays unreachable', async () => {
    const fixture = await startModernHttpFixture();
    cleanups.push(() => fixture.close());
    const port = await gate(() => fixture);
    const { client, logger } = await sessionFor({ kind: 'http', url: port.url() });
    expect(textOf(await callTool(client, 'fx__echo', { message: 'before' }))).toBe('echo: before');
    await port.shut();

    const refused = await callTool(client, 'fx__echo', { message: 'nobody' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/could not be reached for "echo" \(ECONNREFUSED\); the call was never sent/);
    expect(textOf(refused)).not.toMatch(/outcome is unknown|may or may not have run/);
    expect(logger.lines).toContainEqual(
      expect.stringMatching(/^server "fx": "echo" never connected \(ECONNREFUSED: .*\); sending it again in 1 s$/),
    );
    expect(logger.lines).toContainEqual(
      expect.stringMatching(/^server "fx": "echo" never connected \(ECONNREFUSED: .*127\.0\.0\.1.*\); not sent again$/),
    );
    expect(fixture.state.calls.filter((call) => call.tool === 'echo')).toHaveLength(1);
  });
});
