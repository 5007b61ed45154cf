import { fileURLToPath } from 'node:url';
import type { Client, ClientCapabilities, ElicitRequestFormParams, ElicitResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { connectInMemory, type Gateway } from '../../proxy/index';
import { cleanupStack, startedGateway, waitableLogger } from '../gateway/support';
import { callTool, searchNames } from '../proxy/helpers';
import { EVERYTHING_ENTRY } from '../transparent/helpers';

// SPEC §3.10 in search mode: downstreams are shared, so the proxy declares elicitation, sampling
// and roots to them and sends a downstream's request to the session whose call_tool is running.
const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const ALL: ClientCapabilities = { elicitation: { form: {} }, sampling: {}, roots: {} };
const ASKING = fileURLToPath(new URL('../transparent/asking-server.ts', import.meta.url));

function allText(result: unknown): string {
  const content = (result as { content?: unknown }).content;
  if (!Array.isArray(content)) return '';
  return content.map((block: { type?: string; text?: string }) => (block.type === 'text' ? block.text : '')).join('\n');
}

async function gatewayWithEverything() {
  const logger = waitableLogger();
  const gateway = await startedGateway(cleanups, {
    logger,
    servers: {
      everything: { kind: 'stdio', command: process.execPath, args: [EVERYTHING_ENTRY, 'stdio'] },
      asking: { kind: 'stdio', command: process.execPath, args: ['--import', 'tsx', ASKING] },
    },
  });
  return { gateway, logger };
}

interface Session {
  readonly client: Client;
  readonly forms: ElicitRequestFormParams[];
  readonly sampled: unknown[];
}

async function session(
  gateway: Gateway,
  options: { answer?: () => ElicitResult | Promise<ElicitResult>; capabilities?: ClientCapabilities } = {},
): Promise<Session> {
  const capabilities = options.capabilities ?? ALL;
  const client = await connectInMemory(gateway, { capabilities, principal: { id: 'test' } });
  cleanups.push(() => client.close());
  const forms: ElicitRequestFormParams[] = [];
  const sampled: unknown[] = [];
  if (capabilities.elicitation) {
    client.setRequestHandler('elicitation/create', (request) => {
      forms.push(request.params as ElicitRequestFormParams);
      return options.answer?.() ?? { action: 'cancel' };
    });
  }
  if (capabilities.sampling) {
    client.setRequestHandler('sampling/createMessage', (request) => {
      sampled.push(request.params);
      return { model: 'm', role: 'assistant', content: { type: 'text', text: 'sampled in the chat' } };
    });
  }
  if (capabilities.roots) {
    client.setRequestHandler('roots/list', () => ({
      roots: [{ uri: 'file:///projects/chat', name: 'Chat' }],
    }));
  }
  return { client, forms, sampled };
}

async function discover(client: Client, name: string, query: string): Promise<void> {
  expect(await searchNames(client, query, 10)).toContain(name);
}

describe("search mode relays a downstream's requests to the calling session", () => {
  it.each([
    ['accept', { action: 'accept', content: { name: 'Grace Hopper' } }, 'Name: Grace Hopper'],
    ['decline', { action: 'decline' }, 'User declined to provide the requested information'],
    ['cancel', { action: 'cancel' }, 'User cancelled the elicitation dialog'],
  ] as const)('trigger-elicitation-request through call_tool, the user choosing %s', async (_label, answer, said) => {
    const { gateway } = await gatewayWithEverything();
    const chat = await session(gateway, { answer: () => answer });
    await discover(chat.client, 'everything__trigger-elicitation-request', 'trigger elicitation request');
    const result = await callTool(chat.client, 'everything__trigger-elicitation-request');
    expect(allText(result)).toContain(said);
    expect(chat.forms.map((form) => form.message)).toEqual(['Please provide inputs for the following fields:']);
  });

  it('trigger-sampling-request through call_tool reaches the calling session only', async () => {
    const { gateway } = await gatewayWithEverything();
    const other = await session(gateway);
    const chat = await session(gateway);
    await discover(chat.client, 'everything__trigger-sampling-request', 'trigger sampling request');
    const result = await callTool(chat.client, 'everything__trigger-sampling-request', { prompt: 'Hello' });
    expect(allText(result)).toContain('sampled in the chat');
    expect(chat.sampled).toHaveLength(1);
    expect(other.sampled).toEqual([]);
  });

  it('roots/list during a call lists the calling session roots', async () => {
    const { gateway } = await gatewayWithEverything();
    const chat = await session(gateway);
    await discover(chat.client, 'asking__list_roots', 'list the client roots');
    const result = await callTool(chat.client, 'asking__list_roots');
    expect(JSON.parse(allText(result))).toEqual([{ uri: 'file:///projects/chat', name: 'Chat' }]);
  });

  it('a roots/list outside any call is answered with no roots and logged', async () => {
    // server-everything asks for roots by itself shortly after it initializes, outside any call.
    const { logger } = await gatewayWithEverything();
    await expect(
      logger.waitFor(
        'server "everything" sent roots/list; answered with no roots: no call to server "everything" is in progress',
      ),
    ).resolves.toBeDefined();
  });

  it('a session that cannot sample gets the request refused, and the downstream reports the error', async () => {
    const { gateway, logger } = await gatewayWithEverything();
    const chat = await session(gateway, { capabilities: { elicitation: { form: {} } } });
    await discover(chat.client, 'everything__trigger-sampling-request', 'trigger sampling request');
    const result = await callTool(chat.client, 'everything__trigger-sampling-request', { prompt: 'Hello' });
    expect(result.isError).toBe(true);
    expect(allText(result)).toContain('the client does not support sampling');
    await logger.waitFor(
      'server "everything" sent sampling/createMessage; refused: the client does not support sampling',
    );
  });

  it('a downstream form asking for a password is declined; the session never sees it', async () => {
    const { gateway, logger } = await gatewayWithEverything();
    const chat = await session(gateway, {
      answer: () => ({ action: 'accept', content: { username: 'u', password: 'p' } }),
    });
    await discover(chat.client, 'asking__connect_bank', 'connect a bank account');
    const result = await callTool(chat.client, 'asking__connect_bank');
    const report = JSON.parse(allText(result)) as { action: string; fields: string[]; refused: string | null };
    expect(report).toMatchObject({ action: 'decline', fields: [] });
    expect(report.refused).toContain('"password"');
    expect(chat.forms).toEqual([]);
    await logger.waitFor('server "asking" asked for a secret through a form; declined: "password"');
  });

  it('with calls from two sessions in flight, a downstream request is refused rather than guessed', async () => {
    const { gateway, logger } = await gatewayWithEverything();
    let release: () => void = () => undefined;
    const held = new Promise<ElicitResult>((resolve) => {
      release = () => resolve({ action: 'cancel' });
    });
    let shown: () => void = () => undefined;
    const formShown = new Promise<void>((resolve) => {
      shown = resolve;
    });
    const first = await session(gateway, {
      answer: () => {
        shown();
        return held;
      },
    });
    const second = await session(gateway, { answer: () => ({ action: 'accept', content: { name: 'Nobody' } }) });
    await discover(first.client, 'everything__trigger-elicitation-request', 'trigger elicitation request');
    await discover(second.client, 'everything__trigger-elicitation-request', 'trigger elicitation request');
    const running = callTool(first.client, 'everything__trigger-elicitation-request');
    await formShown;
    const refused = await callTool(second.client, 'everything__trigger-elicitation-request');
    expect(refused.isError).toBe(true);
    expect(allText(refused)).toContain('calls from 2 sessions to server "everything" are in progress');
    expect(second.forms).toEqual([]);
    await logger.waitFor('server "everything" sent elicitation/create; refused: calls from 2 sessions');
    release();
    expect(allText(await running)).toContain('User cancelled the elicitation dialog');
  });
});
