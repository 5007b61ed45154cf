import { afterEach, describe, expect, it } from 'vitest';
import { startHttpFixture } from '../fixtures/http-fixture-server';
import { textOf } from '../proxy/helpers';
import { startCredentialedGateway } from './fixtures/credentialed-gateway';

// Issue 11 item 2: a credentialed server that answers 302 to a URL containing the token it was
// sent. Redirects are never followed (SPEC §3.2), and the error that names the target is shown
// in the startup log line and as the load_mcp_server failure: the token must be redacted there.

const token = 'tok-redirect-93ac61f0';
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

describe('a configured server that redirects to a URL carrying its token', () => {
  it('the startup report and log line name the redirect without the token', async () => {
    const server = await startHttpFixture();
    cleanups.push(() => server.close());
    const proxy = await startCredentialedGateway({
      servers: { moved: { kind: 'http', url: server.tokenRedirectUrl } },
      tokens: { moved: token },
    });
    cleanups.push(() => proxy.close());
    // The server received the token and put it into its Location header.
    expect(server.seen.map((request) => request.headers.authorization)).toContain(`Bearer ${token}`);

    const failure = proxy.started.failed.find((entry) => entry.name === 'moved');
    expect(failure?.reason).toMatch(/redirect \(HTTP 302\) to .*\[redacted\].*; redirects are never followed/);
    expect(failure?.reason).not.toContain(token);
    const logged = proxy.logs.join('\n');
    expect(logged).toMatch(/server "moved" failed to start: .*redirect \(HTTP 302\)/);
    expect(logged).not.toContain(token);
    // Only the configured URL was contacted: the redirect was not followed.
    expect(server.seen.map((request) => request.path)).toEqual(['/token-redirect']);
  });

  it('load_mcp_server of that server fails with the redirect named and the token redacted', async () => {
    const server = await startHttpFixture();
    cleanups.push(() => server.close());
    const proxy = await startCredentialedGateway({
      servers: { moved: { kind: 'http', url: server.tokenRedirectUrl } },
      tokens: { moved: token },
    });
    cleanups.push(() => proxy.close());
    // Same name, exactly its configured URL: the token is presented again (SPEC §3.9).
    const result = await proxy.client.callTool({
      name: 'load_mcp_server',
      arguments: { server_name: 'moved', url: server.tokenRedirectUrl },
    });
    const text = textOf(result);
    expect(text).toMatch(/redirect \(HTTP 302\) to .*\[redacted\]/);
    expect(text).not.toContain(token);
    expect(server.seen.filter((request) => request.headers.authorization === `Bearer ${token}`)).toHaveLength(2);
    expect([...proxy.logs, JSON.stringify(proxy.events)].join('\n')).not.toContain(token);
  });
});
