import { afterEach, describe, expect, it } from 'vitest';
import { createGateway } from '../../proxy/index';
import { type HttpFixture, startHttpFixture } from '../fixtures/http-fixture-server';
import { callTool, connectClient, memoryLogger, searchNames, textOf } from '../proxy/helpers';

/**
 * Issue 11 item 6 (concurrent-load race, SPEC §3.4): two concurrent load_mcp_server calls with one
 * name both reported "Loaded", and search showed server A's tools while calls went to server B.
 * Admission is serialised per name: exactly one wins, and search and calls agree on which.
 */

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function fixture(name: string): Promise<HttpFixture> {
  const started = await startHttpFixture({ name });
  cleanups.push(() => started.close());
  return started;
}

describe('concurrent load_mcp_server calls with one name', () => {
  it('load exactly one server, and calls reach the server search described', async () => {
    const first = await fixture('first');
    const second = await fixture('second');
    const gateway = createGateway({ embeddings: false, logger: memoryLogger(), allowLocalhostLoads: true });
    cleanups.push(() => gateway.close());
    const [a, b] = await Promise.all([connectClient(gateway), connectClient(gateway)]);
    const results = await Promise.all(
      [
        [a, first],
        [b, second],
        [a, second],
        [b, first],
      ].map(async ([client, server]) =>
        textOf(
          await (client as typeof a).callTool({
            name: 'load_mcp_server',
            arguments: { server_name: 'shared', url: (server as HttpFixture).url },
          }),
        ),
      ),
    );
    expect(results.filter((text) => /^Loaded "shared"/.test(text))).toHaveLength(1);
    expect(results.filter((text) => /already connected|already admitted/.test(text))).toHaveLength(3);

    // The losers were refused before any connection: only one server was ever contacted.
    expect([first, second].filter((server) => server.seen.length > 0)).toHaveLength(1);
    expect(await searchNames(a, 'echoes back the message')).toContain('shared__echo');
    expect(textOf(await callTool(a, 'shared__echo', { message: 'which' }))).toBe('echo: which');
    const called = [first, second].filter((server) => server.calls.length > 0);
    expect(called).toHaveLength(1);
    // The server that took the call is the one whose session was opened: no tools from one, calls to the other.
    const other = called[0] === first ? second : first;
    expect(other.calls).toEqual([]);
  });
});
