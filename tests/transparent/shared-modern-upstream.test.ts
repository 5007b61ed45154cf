/**
 * Issue 31: transparent mode gives a 2026-07-28 upstream one shared connection, with each
 * request's own client capabilities sent along, instead of a pool keyed by principal and
 * capabilities. Through the real CLI over loopback HTTP, two principals with different
 * capabilities, and a real 2026-only upstream process that counts its starts: one process serves
 * both; the upstream's `input_required` reaches the client whose call got it even while another
 * principal's call is in flight on the same connection; and a client that declared no forms is
 * never asked one.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, type ClientCapabilities, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupStack } from '../gateway/support';
import { startHttpProxy, writeTemporary } from './cli-process';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const MODERN = fileURLToPath(new URL('../fixtures/modern-stdio-fixture-server.ts', import.meta.url));
const alice = 'alice-token-0123456789abcdef';
const bob = 'bob-token-0123456789abcdefgh';

async function client(url: string, token: string, capabilities: ClientCapabilities) {
  const connected = new Client(
    { name: 'sessionless', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities },
  );
  if (capabilities.elicitation) {
    connected.setRequestHandler('elicitation/create', () => ({ action: 'accept', content: { name: 'Ada' } }));
  }
  await connected.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  cleanups.push(() => connected.close());
  return connected;
}

const textOf = (result: unknown) =>
  ((result as { content?: { type: string; text?: string }[] }).content ?? []).map((block) => block.text ?? '').join('');

describe('transparent mode shares one connection to a 2026-07-28 upstream', () => {
  it('serves two principals over one upstream process, each call asked only through its own client', async () => {
    const folder = await writeTemporary('inbound', `alice=${alice}\nbob=${bob}\n`);
    const starts = join(folder, '..', 'starts');
    const config = await writeTemporary(
      'config.yaml',
      `upstream:
  command: ${JSON.stringify(process.execPath)}
  args: ${JSON.stringify(['--import', 'tsx', MODERN, starts])}
  protocol: 2026-07-28
`,
    );
    const proxy = await startHttpProxy(config, ['--http-tokens', folder]);
    cleanups.push(() => proxy.stop());
    const asAlice = await client(proxy.url, alice, { elicitation: { form: {} } });
    const asBob = await client(proxy.url, bob, {});

    expect(textOf(await asAlice.callTool({ name: 'echo', arguments: { message: 'from alice' } }))).toBe(
      'echo: from alice',
    );
    // What one connection costs in upstream starts (the SDK's probe sibling included): no more follow.
    const started = () => readFileSync(starts, 'utf8').trim().split('\n').length;
    const opened = started();
    expect(textOf(await asBob.callTool({ name: 'echo', arguments: { message: 'from bob' } }))).toBe('echo: from bob');

    // Bob's call stays in flight on the shared connection while alice's is asked for her name.
    const hanging = asBob.callTool({ name: 'hang', arguments: {} }).catch(() => undefined);
    // Time for it to reach the upstream (with 2 calls in flight, the proxy without per-call routing refuses alice's question).
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(textOf(await asAlice.callTool({ name: 'greet', arguments: {} }))).toBe('Hello, Ada!');

    // Bob declared no forms: he is never asked one, and the question is never sent to alice.
    const refused = await asBob.callTool({ name: 'greet', arguments: {} });
    // The upstream was told bob's own capabilities, so it does not even ask.
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/client capabilities do not declare the required capability/);

    expect(started()).toBe(opened);
    void hanging;
  });
});
