import { ResultSchema } from '@modelcontextprotocol/core';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import type { ProxyEvent } from '../../proxy/index';
import { callTool, configFrom, connectThroughProxy, EVERYTHING_ENTRY, type ProxySession } from './helpers';

const textOf = (result: CallToolResult) =>
  result.content.map((block) => (block.type === 'text' ? block.text : '')).join('');

/** server-everything behind a transparent proxy whose YAML hides a tool, a prompt and some resources. */
function hidingConfig() {
  return configFrom({
    upstream: { command: process.execPath, args: [EVERYTHING_ENTRY, 'stdio'] },
    filters: {
      access_control: {
        deny: ['get-env'],
        deny_patterns: ['trigger-*'],
        deny_resources: ['demo://resource/static/document/*'],
        deny_prompts: ['args-prompt', 'completable-*'],
      },
    },
  });
}

let session: ProxySession | undefined;
afterEach(async () => {
  await session?.close();
  session = undefined;
});

async function connect(events: ProxyEvent[]): Promise<ProxySession> {
  session = await connectThroughProxy({
    config: hidingConfig(),
    list: false,
    gateway: { onEvent: (event) => events.push(event) },
  });
  return session;
}

const names = (items: unknown, key: string): string[] =>
  (items as Record<string, string>[]).map((item) => String(item[key]));

describe('transparent mode: what the listing filters show is what may be called (SPEC §3.5)', () => {
  it('calls a listable tool with no tools/list in the session, and hides and refuses a denied one', async () => {
    const events: ProxyEvent[] = [];
    const { client } = await connect(events);
    expect(textOf(await callTool(client, 'echo', { message: 'no listing first' }))).toBe('Echo: no listing first');
    const refused = await callTool(client, 'get-env', {});
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/blocked by access control/);
    expect(textOf(refused)).not.toMatch(/PATH|HOME/);
    expect(events.some((event) => event.tool === 'get-env' && event.decision === 'deny')).toBe(true);
    const listed = await client.request({ method: 'tools/list' }, ResultSchema);
    const tools = names(listed.tools, 'name');
    expect(tools).toContain('echo');
    expect(tools).not.toContain('get-env');
    expect(tools.filter((name) => name.startsWith('trigger-'))).toEqual([]);
  });

  it('refuses a hidden resource with an event, reads a visible one, and lists neither hidden one', async () => {
    const events: ProxyEvent[] = [];
    const { client } = await connect(events);
    const listed = await client.request({ method: 'resources/list' }, ResultSchema);
    const uris = names(listed.resources, 'uri');
    expect(uris.filter((uri) => uri.startsWith('demo://resource/static/document/'))).toEqual([]);
    await expect(
      client.request(
        { method: 'resources/read', params: { uri: 'demo://resource/static/document/architecture.md' } },
        ResultSchema,
      ),
    ).rejects.toThrow(/Resource not found/);
    const denied = events.find((event) => event.tool.startsWith('resources/read') && event.decision === 'deny');
    expect(denied).toMatchObject({ filter: 'accessControl', pipeline: 'call' });
    expect(denied?.scope).toMatch(/^[A-Za-z0-9_-]{16}$/);
    // A resource the filters do not hide, from the upstream's dynamic template.
    const visible = 'demo://resource/dynamic/text/1';
    const read = await client.request({ method: 'resources/read', params: { uri: visible } }, ResultSchema);
    expect(Array.isArray(read.contents)).toBe(true);
    expect(events.some((event) => event.tool === `resources/read ${visible}` && event.decision === 'allow')).toBe(true);
  });

  it('refuses a hidden prompt, and a completion for it, with events; a visible prompt works', async () => {
    const events: ProxyEvent[] = [];
    const { client } = await connect(events);
    const listed = await client.request({ method: 'prompts/list' }, ResultSchema);
    const prompts = names(listed.prompts, 'name');
    expect(prompts).toContain('simple-prompt');
    expect(prompts).not.toContain('args-prompt');
    expect(prompts).not.toContain('completable-prompt');
    await expect(
      client.request(
        { method: 'prompts/get', params: { name: 'args-prompt', arguments: { city: 'x' } } },
        ResultSchema,
      ),
    ).rejects.toThrow(/Unknown prompt/);
    await expect(
      client.request(
        {
          method: 'completion/complete',
          params: {
            ref: { type: 'ref/prompt', name: 'completable-prompt' },
            argument: { name: 'department', value: 'E' },
          },
        },
        ResultSchema,
      ),
    ).rejects.toThrow(/Unknown prompt/);
    const got = await client.request({ method: 'prompts/get', params: { name: 'simple-prompt' } }, ResultSchema);
    expect(Array.isArray(got.messages)).toBe(true);
    expect(events.filter((event) => event.decision === 'deny').map((event) => event.tool.split(' ')[0])).toEqual([
      'prompts/get',
      'completion/complete',
    ]);
  });
});
