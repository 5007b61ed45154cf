import { afterEach, describe, expect, it } from 'vitest';
import { createGateway, type GatewayOptions } from '../../proxy/index';
import { type HttpFixture, startHttpFixture } from '../fixtures/http-fixture-server';
import { connectClient, memoryLogger, textOf } from '../proxy/helpers';

/**
 * Issue 11 item 5 (name hijack, SPEC §3.4): the model re-pointed a configured server's name while
 * that server was down. A name the operator configured or admitted is the operator's, connected
 * or not: load_mcp_server can never bind it to another address.
 */

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function fixture(): Promise<HttpFixture> {
  const started = await startHttpFixture();
  cleanups.push(() => started.close());
  return started;
}

async function proxy(options: GatewayOptions) {
  // The opt-in lets the attacker's server on loopback be loadable at all: the name is the point.
  const gateway = createGateway({ embeddings: false, logger: memoryLogger(), allowLocalhostLoads: true, ...options });
  cleanups.push(() => gateway.close());
  const started = await gateway.start();
  return { gateway, started, client: await connectClient(gateway) };
}

async function load(client: Awaited<ReturnType<typeof proxy>>['client'], name: string, url: string) {
  return textOf(await client.callTool({ name: 'load_mcp_server', arguments: { server_name: name, url } }));
}

describe('a configured server name cannot be re-pointed by load_mcp_server', () => {
  it('refuses the name of an HTTP server that failed at start', async () => {
    const operator = await fixture();
    const attacker = await fixture();
    const { started, client } = await proxy({ servers: { notion: { kind: 'http', url: operator.downUrl } } });
    expect(started.failed.map((failure) => failure.name)).toEqual(['notion']);
    expect(await load(client, 'notion', attacker.url)).toMatch(/"notion" belongs to the operator's configuration/);
    expect(attacker.seen).toEqual([]);
  });

  it('refuses the name of a stdio server whose child could not start', async () => {
    const attacker = await fixture();
    const { started, client } = await proxy({
      servers: { files: { kind: 'stdio', command: process.execPath, args: ['-e', 'process.exit(3)'] } },
    });
    expect(started.failed.map((failure) => failure.name)).toEqual(['files']);
    expect(await load(client, 'files', attacker.url)).toMatch(/"files" belongs to the operator's configuration/);
    expect(attacker.seen).toEqual([]);
  });

  it('refuses a name the operator admitted with admit(), even though it failed', async () => {
    const operator = await fixture();
    const attacker = await fixture();
    const { gateway, client } = await proxy({});
    await expect(gateway.admit('ops', { kind: 'http', url: operator.downUrl })).rejects.toThrow();
    expect(await load(client, 'ops', attacker.url)).toMatch(/"ops" belongs to the operator's configuration/);
    expect(attacker.seen).toEqual([]);
  });

  it('still lets the model retry the operator server at exactly its configured URL', async () => {
    const operator = await fixture();
    operator.auth.bearer = 'not-yet';
    const { started, client } = await proxy({ servers: { notion: { kind: 'http', url: operator.url } } });
    expect(started.failed.map((failure) => failure.name)).toEqual(['notion']);
    operator.auth.bearer = undefined;
    expect(await load(client, 'notion', operator.url)).toMatch(/Loaded "notion" with \d+ tools/);
  });
});
