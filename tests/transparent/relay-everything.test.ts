import { fileURLToPath } from 'node:url';
import type { ClientCapabilities, CreateMessageRequest } from '@modelcontextprotocol/client';
import { Client, ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { ResultSchema } from '@modelcontextprotocol/core';
import { afterEach, describe, expect, it } from 'vitest';
import type { ProxyEvent } from '../../proxy/index';
import { callTool, configFrom, connectThroughProxy, EVERYTHING_ENTRY, type ProxySession } from './helpers';

/** What a client that can do everything server-everything asks for declares. */
const ALL: ClientCapabilities = { elicitation: { form: {} }, sampling: {}, roots: { listChanged: true } };
/** All text of a tool result (server-everything answers in several blocks). */
function textOf(result: unknown): string {
  const content = (result as { content?: unknown }).content;
  if (!Array.isArray(content)) return '';
  return content.map((block: { type?: string; text?: string }) => (block.type === 'text' ? block.text : '')).join('\n');
}

const ROOTS = [{ uri: 'file:///projects/demo', name: 'Demo project' }];
const ASKING = fileURLToPath(new URL('./asking-server.ts', import.meta.url));

function everything() {
  return configFrom({ upstream: { command: process.execPath, args: [EVERYTHING_ENTRY, 'stdio'] } });
}

/** server-everything's raw tools/list for a direct client declaring `capabilities` (answering roots). */
async function directList(capabilities: ClientCapabilities): Promise<unknown> {
  const direct = new Client({ name: 'direct', version: '1.0.0' }, { capabilities });
  if (capabilities.roots) direct.setRequestHandler('roots/list', () => ({ roots: ROOTS }));
  await direct.connect(
    new StdioClientTransport({ command: process.execPath, args: [EVERYTHING_ENTRY, 'stdio'], stderr: 'ignore' }),
  );
  try {
    return await direct.request({ method: 'tools/list' }, ResultSchema);
  } finally {
    await direct.close();
  }
}

const sampled: CreateMessageRequest['params'][] = [];
function sample(params: CreateMessageRequest['params']) {
  sampled.push(params);
  return { model: 'test-model', role: 'assistant' as const, content: { type: 'text' as const, text: 'sampled reply' } };
}

let session: ProxySession | undefined;
afterEach(async () => {
  await session?.close();
  session = undefined;
  sampled.length = 0;
});

describe('transparent proxy relays server-to-client requests (server-everything upstream)', () => {
  it('declares the client capabilities upstream: tools/list deep-equals a direct connection with them', async () => {
    session = await connectThroughProxy({ config: everything(), capabilities: ALL, sample, roots: ROOTS });
    const proxied = await session.client.request({ method: 'tools/list' }, ResultSchema);
    expect(proxied).toEqual(await directList(ALL));
    const names = (proxied.tools as { name: string }[]).map((tool) => tool.name);
    expect(names).toEqual(
      expect.arrayContaining(['trigger-elicitation-request', 'trigger-sampling-request', 'get-roots-list']),
    );
  });

  it('a client declaring none of them sees what a direct client declaring none sees', async () => {
    session = await connectThroughProxy({ config: everything(), capabilities: {} });
    const proxied = await session.client.request({ method: 'tools/list' }, ResultSchema);
    expect(proxied).toEqual(await directList({}));
    const names = (proxied.tools as { name: string }[]).map((tool) => tool.name);
    expect(names).not.toContain('trigger-elicitation-request');
    expect(names).not.toContain('trigger-sampling-request');
    expect(names).not.toContain('get-roots-list');
  });

  it.each([
    ['accept', 'User provided the requested information', { action: 'accept', content: { name: 'Ada Lovelace' } }],
    ['decline', 'User declined to provide the requested information', { action: 'decline' }],
    ['cancel', 'User cancelled the elicitation dialog', { action: 'cancel' }],
  ] as const)('relays trigger-elicitation-request and the user choosing %s', async (_action, said, answer) => {
    session = await connectThroughProxy({
      config: everything(),
      capabilities: ALL,
      answer: () => answer,
      sample,
      roots: ROOTS,
    });
    const result = await callTool(session.client, 'trigger-elicitation-request', {});
    expect(result.isError).not.toBe(true);
    expect(textOf(result)).toContain(said);
    if (answer.action === 'accept') expect(textOf(result)).toContain('Name: Ada Lovelace');
    // The upstream's own form, as it sent it: its message and its fields, no proxy copy.
    expect(session.forms).toHaveLength(1);
    expect(session.forms[0]?.message).toBe('Please provide inputs for the following fields:');
    expect(Object.keys(session.forms[0]?.requestedSchema.properties ?? {})).toContain('birthdate');
    // Tied to the tool call: the form travelled with the client's tools/call request id.
    const form = session.sent.find(
      (entry) => 'method' in entry.message && entry.message.method === 'elicitation/create',
    );
    const answered = session.sent.find(
      (entry) => 'result' in entry.message && textOf(entry.message.result).includes(said),
    );
    expect(form?.options?.relatedRequestId).toBeDefined();
    expect(form?.options?.relatedRequestId).toBe(answered && 'id' in answered.message ? answered.message.id : 'none');
  });

  it('relays trigger-sampling-request to the client model and its reply back', async () => {
    session = await connectThroughProxy({ config: everything(), capabilities: ALL, sample, roots: ROOTS });
    const result = await callTool(session.client, 'trigger-sampling-request', { prompt: 'Say hi', maxTokens: 12 });
    expect(textOf(result)).toContain('sampled reply');
    expect(sampled).toHaveLength(1);
    expect(sampled[0]).toMatchObject({ maxTokens: 12, systemPrompt: 'You are a helpful test server.' });
    expect(JSON.stringify(sampled[0]?.messages)).toContain('Say hi');
  });

  it('relays a sampling refusal by the client as an error to the upstream', async () => {
    session = await connectThroughProxy({
      config: everything(),
      capabilities: ALL,
      roots: ROOTS,
      sample: () => {
        throw new ProtocolError(ProtocolErrorCode.InvalidRequest, 'User rejected sampling request');
      },
    });
    const result = await callTool(session.client, 'trigger-sampling-request', { prompt: 'Say hi' });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('User rejected sampling request');
  });

  it("relays roots/list: the upstream lists the client's roots", async () => {
    session = await connectThroughProxy({ config: everything(), capabilities: ALL, sample, roots: ROOTS });
    const result = await callTool(session.client, 'get-roots-list', {});
    expect(textOf(result)).toContain('file:///projects/demo');
    expect(textOf(result)).toContain('Demo project');
  });
});

describe('transparent proxy relays notifications/roots/list_changed upstream', () => {
  it('the upstream re-lists roots after the client says they changed', async () => {
    let roots = ROOTS;
    let askedSinceChange = false;
    session = await connectThroughProxy({ config: everything(), capabilities: ALL, sample });
    session.client.setRequestHandler('roots/list', () => {
      askedSinceChange = roots !== ROOTS;
      return { roots };
    });
    expect(textOf(await callTool(session.client, 'get-roots-list', {}))).toContain('file:///projects/demo');
    // server-everything logs "Roots updated" once it has stored roots it asked for: wait for the
    // first such line after it asked for the changed ones.
    let stored: () => void = () => undefined;
    session.client.setNotificationHandler('notifications/message', (notification) => {
      if (askedSinceChange && String(notification.params.data).startsWith('Roots updated')) stored();
    });
    const restored = new Promise<void>((resolve) => {
      stored = resolve;
    });
    roots = [{ uri: 'file:///projects/other', name: 'Other project' }];
    await session.client.sendRootsListChanged();
    await restored;
    expect(textOf(await callTool(session.client, 'get-roots-list', {}))).toContain('file:///projects/other');
  });
});

describe('transparent proxy screens upstream forms for secrets', () => {
  it('declines a form asking for a password: the user never sees it, the upstream gets a decline and the reason', async () => {
    const events: ProxyEvent[] = [];
    const lines: string[] = [];
    session = await connectThroughProxy({
      config: configFrom({ upstream: { command: process.execPath, args: ['--import', 'tsx', ASKING] } }),
      capabilities: ALL,
      answer: () => ({ action: 'accept', content: { username: 'ada', password: 'hunter2' } }),
      gateway: { onEvent: (event) => events.push(event) },
      log: (line) => lines.push(line),
    });
    const result = await callTool(session.client, 'connect_bank', {});
    const report = JSON.parse(textOf(result)) as { action: string; fields: string[]; refused: string | null };
    expect(report.action).toBe('decline');
    expect(report.fields).toEqual([]);
    expect(report.refused).toMatch(/asked for a secret \("password" \(looks like password\)\)/);
    expect(session.forms).toEqual([]);
    expect(lines.join('\n')).toContain('the upstream asked for a secret through a form; declined: "password"');
    expect(events).toContainEqual(
      expect.objectContaining({ filter: 'upstreamElicitation', tool: 'connect_bank', decision: 'deny' }),
    );
  });
});
