/**
 * The input primitive's URL variant (SPEC §3.12), over real loopback HTTP with real SDK clients: a
 * local tool sends the person to two pages (the way `request_approval` sends them to the approval
 * windows) and answers once what they do there has settled. A 2026-07-28 client gets
 * `input_required` with one URL elicitation per page, and each retry waits a bounded while before
 * asking again; a 2025-11-25 client gets `elicitation/create` in URL mode and
 * `notifications/elicitation/complete`; a client that cannot open URLs is not asked at all.
 */
import { Client, type ElicitRequestURLParams, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  type CallToolResult,
  ElicitationCompleteNotificationSchema,
  ElicitRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import type { LocalTool } from '../../proxy/gateway/create-gateway';
import { serveHttp } from '../../proxy/http/serve-http';
import { createInputRounds } from '../../proxy/meta-tools/input-rounds';
import { memorySpentLedger } from '../../proxy/store/spent-ledger';
import { textOf } from '../proxy/helpers';
import { cleanupStack, startedGateway } from './support';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const token = 'url-rounds-token-0123456789abcdef';

/** Something the person settles on a page, and a way to wait for it (no sleeps: a promise). */
function door() {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  let settled = false;
  let polling: () => void = () => {};
  /** Resolves once an asker waits on the door (a long-poll began). */
  const polled = new Promise<void>((resolve) => {
    polling = resolve;
  });
  return {
    polled,
    settle() {
      settled = true;
      open();
    },
    /** Resolves true once settled, false after `timeoutMs`: the long-poll a real asker does. */
    async wait(timeoutMs: number): Promise<boolean> {
      if (settled || timeoutMs === 0) return settled;
      polling();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([opened, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
      clearTimeout(timer);
      return settled;
    },
  };
}

/** `open_windows`: asks the person to visit two pages, then answers how the client answered. */
function windowsTool(gate: ReturnType<typeof door>, runs: string[], askId = () => 'approval/one'): LocalTool {
  return {
    name: 'open_windows',
    description: 'Sends the person to two pages.',
    inputSchema: { type: 'object', properties: {} },
    async handler(_args, context) {
      runs.push('ran');
      const answer = await context.elicit?.({
        mode: 'url',
        id: askId(),
        pages: {
          child: { message: 'The child decides.', url: 'http://localhost:3333/approve?as=child&request=one' },
          parent: { message: 'The parent decides.', url: 'http://localhost:3333/approve?as=parent&request=one' },
        },
        settled: ({ timeoutMs }) => gate.wait(timeoutMs),
      });
      return { content: [{ type: 'text', text: `answer: ${answer?.action ?? 'no elicit'}` }] };
    },
  };
}

async function endpoint(
  gate: ReturnType<typeof door>,
  runs: string[],
  urlWaitMs = 50,
  askId?: () => string,
): Promise<string> {
  const gateway = await startedGateway(cleanups, { servers: {}, localTools: [windowsTool(gate, runs, askId)] });
  const rounds = createInputRounds({ key: new Uint8Array(32).fill(7), ledger: memorySpentLedger(), urlWaitMs });
  const served = await serveHttp(gateway, { inboundTokens: [{ name: 'client', token }], rounds });
  cleanups.push(() => served.close());
  return served.url;
}

/** A v2 client speaking 2026-07-28, declaring URL elicitation (or only forms). */
async function modernClient(url: string, options: { manual?: boolean; urls?: boolean; onUrl?: () => void } = {}) {
  const asked: ElicitRequestURLParams[] = [];
  const client = new Client(
    { name: 'url-rounds', version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      capabilities: { elicitation: options.urls === false ? { form: {} } : { url: {} } },
      ...(options.manual && { inputRequired: { autoFulfill: false } }),
    },
  );
  client.setRequestHandler('elicitation/create', (request) => {
    asked.push(request.params as ElicitRequestURLParams);
    options.onUrl?.();
    return { action: 'accept' };
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  cleanups.push(() => client.close());
  return { client, asked };
}

/** Searches for the tool, then returns the `call_tool` request (with the handle a 2026 search returns). */
async function discovered(client: {
  callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<unknown>;
}): Promise<{ name: string; arguments: Record<string, unknown> }> {
  const found = (await client.callTool({
    name: 'search_tools',
    arguments: { query: 'send the person to two pages' },
  })) as {
    structuredContent?: { handle?: string; results?: { name: string }[] };
  };
  expect(found.structuredContent?.results?.map((hit) => hit.name)).toContain('open_windows');
  const handle = found.structuredContent?.handle;
  return {
    name: 'call_tool',
    arguments: { tool_name: 'open_windows', arguments: {}, ...(handle !== undefined && { handle }) },
  };
}
type Round = { resultType?: string; requestState?: string; inputRequests?: Record<string, { params?: unknown }> };

describe('URL asks for a 2026-07-28 client', () => {
  it('answers input_required with one URL elicitation per page, asks again while waiting, and completes once settled', async () => {
    const gate = door();
    const runs: string[] = [];
    const { client } = await modernClient(await endpoint(gate, runs), { manual: true });
    const callWindows = await discovered(client);
    const first = (await client.callTool(callWindows, { allowInputRequired: true })) as Round;
    expect(first.resultType).toBe('input_required');
    expect(first.inputRequests).toEqual({
      'ask-1:child': {
        method: 'elicitation/create',
        params: {
          mode: 'url',
          message: 'The child decides.',
          url: 'http://localhost:3333/approve?as=child&request=one',
        },
      },
      'ask-1:parent': {
        method: 'elicitation/create',
        params: {
          mode: 'url',
          message: 'The parent decides.',
          url: 'http://localhost:3333/approve?as=parent&request=one',
        },
      },
    });
    const opened = { 'ask-1:child': { action: 'accept' }, 'ask-1:parent': { action: 'accept' } };
    const retry = (requestState: string | undefined) =>
      client.callTool({ ...callWindows, inputResponses: opened, requestState } as never, {
        allowInputRequired: true,
      }) as Promise<Round & CallToolResult>;
    // Still waiting after the bounded wait: asked again, the same pages, under a new state.
    const second = await retry(first.requestState);
    expect(second.resultType).toBe('input_required');
    expect(second.inputRequests).toEqual(first.inputRequests);
    expect(second.requestState).not.toBe(first.requestState);
    // Settled: the retry answers.
    gate.settle();
    expect(textOf(await retry(second.requestState))).toBe('answer: accept');
    // The spent state is not a second answer.
    expect(textOf(await retry(second.requestState))).toMatch(/already used/);
  });

  it('a retry waits for the person (a long-poll) and answers as soon as they settle, without asking again', async () => {
    const gate = door();
    const runs: string[] = [];
    const { client } = await modernClient(await endpoint(gate, runs, 60_000), { manual: true });
    const callWindows = await discovered(client);
    const first = (await client.callTool(callWindows, { allowInputRequired: true })) as Round;
    expect(first.resultType).toBe('input_required');
    const retry = client.callTool(
      {
        ...callWindows,
        inputResponses: { 'ask-1:child': { action: 'accept' }, 'ask-1:parent': { action: 'accept' } },
        requestState: first.requestState,
      } as never,
      { allowInputRequired: true },
    ) as Promise<Round & CallToolResult>;
    // The person settles while the server holds the retry open.
    await gate.polled;
    gate.settle();
    const answered = await retry;
    expect(answered.resultType).not.toBe('input_required');
    expect(textOf(answered)).toBe('answer: accept');
  });

  it('a retry whose state names another ask is asked afresh: the client’s answers are not taken for it', async () => {
    const gate = door();
    const runs: string[] = [];
    // Each run of the tool asks about something else (as a new approval request would be).
    const url = await endpoint(gate, runs, 60_000, () => `approval/${runs.length}`);
    const { client } = await modernClient(url, { manual: true });
    const callWindows = await discovered(client);
    const first = (await client.callTool(callWindows, { allowInputRequired: true })) as Round;
    const second = (await client.callTool(
      {
        ...callWindows,
        inputResponses: { 'ask-1:child': { action: 'decline' }, 'ask-1:parent': { action: 'accept' } },
        requestState: first.requestState,
      } as never,
      { allowInputRequired: true },
    )) as Round;
    // Not the decline (that answered another ask), and no wait: asked again at once.
    expect(second.resultType).toBe('input_required');
    expect(runs).toEqual(['ran', 'ran']);
  });

  it('the SDK client fulfils the rounds itself: it opens the pages, and its retry completes once settled', async () => {
    const gate = door();
    const runs: string[] = [];
    // The person settles the pages only after the client was sent to them.
    const { client, asked } = await modernClient(await endpoint(gate, runs, 60_000), { onUrl: () => gate.settle() });
    const callWindows = await discovered(client);
    expect(textOf(await client.callTool(callWindows))).toBe('answer: accept');
    expect(asked.map((params) => params.url)).toEqual([
      'http://localhost:3333/approve?as=child&request=one',
      'http://localhost:3333/approve?as=parent&request=one',
    ]);
  });

  it('a client that would not open a page gets the tool’s own answer (decline), and one that cannot open URLs is not asked', async () => {
    const gate = door();
    const runs: string[] = [];
    const url = await endpoint(gate, runs);
    const { client } = await modernClient(url, { manual: true });
    const callWindows = await discovered(client);
    const first = (await client.callTool(callWindows, { allowInputRequired: true })) as Round;
    const declined = await client.callTool({
      ...callWindows,
      inputResponses: { 'ask-1:child': { action: 'accept' }, 'ask-1:parent': { action: 'decline' } },
      requestState: first.requestState,
    } as never);
    expect(textOf(declined)).toBe('answer: decline');
    const formsOnly = await modernClient(url, { urls: false });
    expect(textOf(await formsOnly.client.callTool(await discovered(formsOnly.client)))).toBe('answer: cancel');
    expect(formsOnly.asked).toEqual([]);
  });
});

describe('URL asks for a 2025-11-25 client that declared URL elicitation', () => {
  it('gets elicitation/create in URL mode per page, then notifications/elicitation/complete for each, then the answer', async () => {
    const gate = door();
    const runs: string[] = [];
    const url = await endpoint(gate, runs);
    const client = new V1Client(
      { name: 'url-rounds-v1', version: '1.0.0' },
      { capabilities: { elicitation: { url: {} } } },
    );
    const asked: { url?: unknown; elicitationId?: unknown; mode?: unknown }[] = [];
    const completed: string[] = [];
    client.setRequestHandler(ElicitRequestSchema, (request) => {
      asked.push(request.params);
      // Both pages were shown: the person settles them.
      if (asked.length === 2) gate.settle();
      return { action: 'accept' };
    });
    client.setNotificationHandler(ElicitationCompleteNotificationSchema, (notification) => {
      completed.push(notification.params.elicitationId);
    });
    await client.connect(
      new V1StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    cleanups.push(() => client.close());
    expect(textOf(await client.callTool(await discovered(client)))).toBe('answer: accept');
    expect(asked.map((params) => [params.mode, params.url])).toEqual([
      ['url', 'http://localhost:3333/approve?as=child&request=one'],
      ['url', 'http://localhost:3333/approve?as=parent&request=one'],
    ]);
    expect(completed.sort()).toEqual(asked.map((params) => String(params.elicitationId)).sort());
    // The tool ran once: the 2025 call stayed open while the person acted.
    expect(runs).toEqual(['ran']);
  });
});
