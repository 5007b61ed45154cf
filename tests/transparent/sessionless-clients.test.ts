/**
 * Issue 31 acceptance: transparent mode for a 2026-07-28 client, through the real CLI, over
 * Streamable HTTP and over stdio. The client has no session and never lists first: a listable
 * tool is called at once, a tool, resource or prompt hidden by `filters.access_control` is refused
 * (and not listed), and a missing required argument is asked for through `input_required`, the
 * answer completing the call. Over stdio, closing the proxy's stdin then ends it with exit code 0.
 */
import {
  Client,
  type ElicitRequestFormParams,
  ProtocolError,
  StreamableHTTPClientTransport,
  type Transport,
} from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupStack } from '../gateway/support';
import { startHttpProxy, startStdioProxy, writeTemporary } from './cli-process';
import { EVERYTHING_ENTRY } from './helpers';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const config = `upstream:
  command: ${JSON.stringify(process.execPath)}
  args: ${JSON.stringify([EVERYTHING_ENTRY, 'stdio'])}
filters:
  access_control:
    deny: [get-env]
    deny_resources: ['demo://resource/static/document/*']
    deny_prompts: [args-prompt]
`;

async function sessionless(transport: Transport, forms: ElicitRequestFormParams[]) {
  const client = new Client(
    { name: 'sessionless', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: { elicitation: { form: {} } } },
  );
  client.setRequestHandler('elicitation/create', (request) => {
    forms.push(request.params as ElicitRequestFormParams);
    return { action: 'accept', content: { message: 'asked for' } };
  });
  await client.connect(transport);
  cleanups.push(() => client.close());
  expect(client.getProtocolEra()).toBe('modern');
  return client;
}

function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.map((block) => block.text ?? '').join('\n');
}

/** What every face owes a 2026 client of transparent mode. */
async function servesWithoutSession(transport: Transport): Promise<void> {
  const forms: ElicitRequestFormParams[] = [];
  const client = await sessionless(transport, forms);
  // 1. No tools/list first: a listable tool is callable at once.
  expect(textOf(await client.callTool({ name: 'echo', arguments: { message: 'straight' } }))).toBe('Echo: straight');
  // 2. A hidden tool is neither listed nor callable.
  const listed = await client.listTools();
  expect(listed.tools.map((tool) => tool.name)).toContain('echo');
  expect(listed.tools.map((tool) => tool.name)).not.toContain('get-env');
  const hidden = await client.callTool({ name: 'get-env', arguments: {} });
  expect(hidden.isError).toBe(true);
  expect(textOf(hidden)).toMatch(/get-env/);
  // 3. A hidden resource and a hidden prompt are refused as absent; visible ones are served.
  await expect(client.readResource({ uri: 'demo://resource/static/document/architecture.md' })).rejects.toThrow(
    ProtocolError,
  );
  await expect(client.getPrompt({ name: 'args-prompt', arguments: { city: 'x' } })).rejects.toThrow(/args-prompt/);
  expect((await client.getPrompt({ name: 'simple-prompt' })).messages.length).toBeGreaterThan(0);
  // 4. The missing required argument is asked for, and the answer completes the call.
  expect(textOf(await client.callTool({ name: 'echo', arguments: {} }))).toBe('Echo: asked for');
  expect(forms).toHaveLength(1);
  expect(Object.keys(forms[0]?.requestedSchema.properties ?? {})).toEqual(['message']);
}

describe('transparent mode for a 2026-07-28 client (no session)', () => {
  it('over HTTP: calls without listing, refuses what access control hides, and asks through input_required', async () => {
    const proxy = await startHttpProxy(await writeTemporary('config.yaml', config));
    cleanups.push(() => proxy.stop());
    await servesWithoutSession(new StreamableHTTPClientTransport(new URL(proxy.url)));
  });

  it('over stdio: the same, and closing its stdin ends it with exit code 0', async () => {
    const proxy = startStdioProxy(await writeTemporary('config.yaml', config));
    cleanups.push(() => proxy.child.kill('SIGKILL'));
    await servesWithoutSession(proxy.transport);

    proxy.child.stdin.end();
    expect(await proxy.exited).toEqual({ code: 0, signal: null });
    expect(proxy.log.text()).not.toMatch(/RangeError|Maximum call stack/);
  });

  it.each(['SIGTERM', 'SIGINT'] as const)(
    'over stdio: one %s ends it with exit code 0, its listen stream closed first',
    async (signal) => {
      const proxy = startStdioProxy(await writeTemporary('config.yaml', config));
      cleanups.push(() => proxy.child.kill('SIGKILL'));
      const client = await sessionless(proxy.transport, []);
      expect(textOf(await client.callTool({ name: 'echo', arguments: { message: 'up' } }))).toBe('Echo: up');
      const subscription = await client.listen({ toolsListChanged: true });

      // Once, with stdin still open: the client has not gone away.
      proxy.child.kill(signal);
      expect(await subscription.closed).toBe('graceful');
      expect(await proxy.exited).toEqual({ code: 0, signal: null });
      expect(proxy.log.text()).not.toMatch(/RangeError|Maximum call stack/);
    },
  );
});
