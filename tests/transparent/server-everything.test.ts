import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { ResultSchema } from '@modelcontextprotocol/core';
import { afterEach, describe, expect, it } from 'vitest';
import { blockedOf, callTool, configFrom, connectThroughProxy, EVERYTHING_ENTRY, type ProxySession } from './helpers';

const PROBE = { name: 'TRANSPARENT_PROXY_PROBE', value: 'configured-in-yaml-42' };

function everythingConfig(extra: Record<string, unknown> = {}) {
  return configFrom({
    proxy: { name: 'everything-proxy' },
    upstream: { command: process.execPath, args: [EVERYTHING_ENTRY, 'stdio'], env: { [PROBE.name]: PROBE.value } },
    tools: {
      echo: {
        elicit: {
          message: 'What should be echoed?',
          fields: { message: { type: 'string', description: 'Text to echo back' } },
        },
      },
    },
    ...extra,
  });
}

let session: ProxySession | undefined;
afterEach(async () => {
  await session?.close();
  session = undefined;
});

describe('transparent proxy in front of server-everything (stdio)', () => {
  it('serves the upstream raw tools/list unchanged: same tools, no wrapper, no prefix', async () => {
    session = await connectThroughProxy({ config: everythingConfig() });
    const proxied = await session.client.request({ method: 'tools/list' }, ResultSchema);

    // The same upstream, asked directly by a client declaring what the proxied client declared (nothing).
    const direct = new Client({ name: 'direct', version: '1.0.0' }, { capabilities: {} });
    await direct.connect(
      new StdioClientTransport({ command: process.execPath, args: [EVERYTHING_ENTRY, 'stdio'], stderr: 'ignore' }),
    );
    const raw = await direct.request({ method: 'tools/list' }, ResultSchema);
    await direct.close();

    expect(proxied).toEqual(raw);
    const names = (proxied.tools as { name: string }[]).map((tool) => tool.name);
    expect(names).toContain('echo');
    expect(names).toContain('get-env');
    expect(names).not.toContain('call_upstream_tool');
    expect(names.filter((name) => name.includes('__'))).toEqual([]);
  });

  it('forwards a complete echo unchanged and sends no form', async () => {
    session = await connectThroughProxy({ config: everythingConfig(), answer: () => ({ action: 'cancel' }) });
    const result = await callTool(session.client, 'echo', { message: 'hello' });
    expect(result.content).toEqual([{ type: 'text', text: 'Echo: hello' }]);
    expect(session.forms).toEqual([]);
  });

  it('asks for a missing message with the configured copy and forwards the merged value', async () => {
    session = await connectThroughProxy({
      config: everythingConfig(),
      answer: () => ({ action: 'accept', content: { message: 'typed in the form' } }),
    });
    const result = await callTool(session.client, 'echo', {});
    expect(result.isError).not.toBe(true);
    expect(result.content).toEqual([{ type: 'text', text: 'Echo: typed in the form' }]);
    expect(session.forms).toHaveLength(1);
    expect(session.forms[0]).toMatchObject({
      mode: 'form',
      message: 'What should be echoed?',
      requestedSchema: {
        type: 'object',
        properties: { message: { type: 'string', description: 'Text to echo back' } },
        required: ['message'],
      },
    });
  });

  it('treats a blank message as missing', async () => {
    session = await connectThroughProxy({
      config: everythingConfig(),
      answer: () => ({ action: 'accept', content: { message: 'filled' } }),
    });
    const result = await callTool(session.client, 'echo', { message: '   ' });
    expect(result.content).toEqual([{ type: 'text', text: 'Echo: filled' }]);
    expect(session.forms).toHaveLength(1);
  });

  it.each([
    ['decline', 'elicitation_declined', 'declined'],
    ['cancel', 'elicitation_cancelled', 'cancelled'],
  ] as const)('returns a structured result when the user chooses %s', async (action, reason, status) => {
    session = await connectThroughProxy({ config: everythingConfig(), answer: () => ({ action }) });
    const result = await callTool(session.client, 'echo', {});
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({
      error: 'tool_call_blocked',
      tool: 'echo',
      status,
      reason,
      missing_or_ambiguous: ['message'],
    });
    expect(blockedOf(result)).toEqual(result.structuredContent);
  });

  it('returns elicitation_unsupported to a client without the capability', async () => {
    session = await connectThroughProxy({ config: everythingConfig() });
    const result = await callTool(session.client, 'echo', {});
    expect(result.structuredContent).toMatchObject({
      reason: 'elicitation_unsupported',
      missing_or_ambiguous: ['message'],
    });
    expect(String((result.structuredContent as { message?: unknown })?.message)).toMatch(/cannot show a form/);
  });

  it('returns elicitation_disabled when the config turns elicitation off, without asking', async () => {
    session = await connectThroughProxy({
      config: everythingConfig({ elicitation: { enabled: false } }),
      answer: () => ({ action: 'accept', content: { message: 'never used' } }),
    });
    const result = await callTool(session.client, 'echo', {});
    expect(result.structuredContent).toMatchObject({ reason: 'elicitation_disabled' });
    expect(session.forms).toEqual([]);
  });

  it('passes upstream.env to the stdio child', async () => {
    session = await connectThroughProxy({ config: everythingConfig() });
    const result = await callTool(session.client, 'get-env', {});
    const first = result.content[0];
    expect(first?.type).toBe('text');
    const env = JSON.parse(first?.type === 'text' ? first.text : '{}') as Record<string, string>;
    expect(env[PROBE.name]).toBe(PROBE.value);
  });

  it('falls back to text for a tool with an outputSchema, and a TypeScript SDK client does not throw', async () => {
    session = await connectThroughProxy({ config: everythingConfig() });
    // listTools() makes the SDK client cache the output-schema validators it enforces in callTool().
    const { tools } = await session.client.listTools();
    expect(tools.find((tool) => tool.name === 'get-structured-content')?.outputSchema).toBeDefined();
    const result = await session.client.callTool({ name: 'get-structured-content', arguments: {} });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toBeUndefined();
    expect(blockedOf(result as never)).toMatchObject({
      reason: 'elicitation_unsupported',
      missing_or_ambiguous: ['location'],
    });
  });

  it('offers an enum field as a choice and forwards the structured answer', async () => {
    session = await connectThroughProxy({
      config: everythingConfig(),
      answer: () => ({ action: 'accept', content: { location: 'Chicago' } }),
    });
    await session.client.listTools();
    const result = await session.client.callTool({ name: 'get-structured-content', arguments: {} });
    expect(session.forms[0]?.requestedSchema).toMatchObject({
      properties: { location: { type: 'string', enum: ['New York', 'Chicago', 'Los Angeles'] } },
    });
    expect(result.structuredContent).toMatchObject({ temperature: 36 });
  });
});
