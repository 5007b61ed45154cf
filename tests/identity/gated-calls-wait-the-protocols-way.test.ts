/**
 * A call gated by `approval_required`, from an external MCP client over real HTTP (issue 29,
 * docs/human-authority.md): the household's real proxy in front of the real shop as a stdio
 * child, the child's software authenticator, and real SDK clients. A 2026-07-28 client that
 * declares URL elicitation gets `input_required` with the child's window and a signed request
 * state; its retry forwards the call once the passkey approval landed (exactly once), and gets the
 * reason after a decline or expiry, forwarding nothing. A 2025-11-25 client that declared URL
 * elicitation gets `elicitation/create` in URL mode, then the call. A client that cannot open URLs
 * keeps the refusal naming the window.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type CallToolResult,
  Client,
  type ElicitRequestURLParams,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { serveHttp } from '../../proxy/http/serve-http';
import { callHashOf } from '../../proxy/index';
import { startTestHousehold, type TestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';
import { assertCall } from './call-approval-support';

const tool = 'pizza__cancel_order';
const token = 'gated-calls-token-0123456789abcdef';
const clockFolder = mkdtempSync(join(tmpdir(), 'gated-clock-'));
const clockFile = join(clockFolder, 'offset-ms');
let household: TestHousehold;
let url: string;
let closeEndpoint: () => Promise<void>;
const clients: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  writeFileSync(clockFile, '0');
  household = await startTestHousehold({ env: { EXTENSIBLE_MCP_TEST_CLOCK_FILE: clockFile } });
  const served = await serveHttp(household.runtime.gateway, { inboundTokens: [{ name: 'external', token }] });
  url = served.url;
  closeEndpoint = () => served.close();
}, 60_000);
beforeEach(() => writeFileSync(clockFile, '0'));
afterEach(async () => {
  for (const client of clients.splice(0)) await client.close();
});
afterAll(async () => {
  await closeEndpoint?.();
  await household?.close();
  rmSync(clockFolder, { recursive: true, force: true });
});

/** A fresh order at the shop, not delivered: the arguments that cancel it. */
async function order(): Promise<{ invoiceId: string; reason: string }> {
  const { invoiceId } = (await household.invoice([{ sku: 'cheese-slice', qty: 1 }])) as { invoiceId: string };
  return { invoiceId, reason: 'ordered twice' };
}

/** The child approves exactly `args` in the window the URL names, with a passkey over their call hash. */
async function approveIn(windowUrl: string, args: Record<string, unknown>) {
  const requestId = new URL(windowUrl).searchParams.get('request') ?? '';
  const assertion = assertCall(household.members.child.authenticator, callHashOf({ tool, arguments: args }));
  const approved = await household.runtime.identity.callApprovals.approve({ requestId, role: 'child', assertion });
  expect(approved).toMatchObject({ ok: true });
}

async function declineIn(windowUrl: string) {
  const requestId = new URL(windowUrl).searchParams.get('request') ?? '';
  expect(await household.runtime.identity.callApprovals.decline({ requestId, role: 'child' })).toMatchObject({
    ok: true,
  });
}

/** The allows on the audit chain that spent request `requestId`'s approval. */
async function allowsFor(requestId: string): Promise<number> {
  await household.runtime.events.flush();
  const rows = await household.runtime.audit.after(0, { filter: { kind: 'approval-decision', outcome: 'allow' } });
  return rows.filter((row) => row.event.approvalId === requestId).length;
}

/** The call-approval identity events on the audit chain about request `requestId`, in order. */
async function lifeOf(requestId: string): Promise<string[]> {
  await household.runtime.events.flush();
  return (await household.runtime.audit.after(0, { limit: 10_000 }))
    .filter((row) => row.event.approvalId === requestId && row.event.kind.startsWith('call-approval-'))
    .map((row) => `${row.event.kind} ${row.event.outcome}`);
}

/** Whether the shop still holds the order open: the in-app path approves a fresh cancel, and it runs. */
async function stillOpen(args: Record<string, unknown>): Promise<string> {
  const asked = (await household.call(tool, args, 'cancel order')).result;
  const detail = (asked.structuredContent as { approvalRequired?: { approveUrls: Record<string, string> } })
    ?.approvalRequired;
  if (detail?.approveUrls.child === undefined) throw new Error(`not asked: ${textOf(asked)}`);
  await approveIn(detail.approveUrls.child, args);
  return textOf((await household.call(tool, args, 'cancel order')).result);
}

/** A v2 client pinned to 2026-07-28; `urls` false declares forms only. */
async function modernClient(options: { manual?: boolean; urls?: boolean; onUrl?: (url: string) => void } = {}) {
  const asked: ElicitRequestURLParams[] = [];
  const client = new Client(
    { name: 'gated-2026', version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      capabilities: { elicitation: options.urls === false ? { form: {} } : { url: {} } },
      ...(options.manual && { inputRequired: { autoFulfill: false } }),
    },
  );
  client.setRequestHandler('elicitation/create', (request) => {
    const params = request.params as ElicitRequestURLParams;
    asked.push(params);
    options.onUrl?.(params.url);
    return { action: 'accept' };
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  clients.push(client);
  const found = (await client.callTool({ name: 'search_tools', arguments: { query: 'cancel order', top_k: 10 } })) as {
    structuredContent?: { handle?: string; results?: { name: string }[] };
  };
  expect(found.structuredContent?.results?.map((hit) => hit.name)).toContain(tool);
  const handle = found.structuredContent?.handle;
  const cancel = (args: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    client.callTool(
      {
        name: 'call_tool',
        arguments: { tool_name: tool, arguments: args, ...(handle !== undefined && { handle }) },
        ...extra,
      } as never,
      // A client that fulfils the rounds itself is handed the final result only.
      options.manual ? { allowInputRequired: true } : undefined,
    ) as Promise<CallToolResult & Round>;
  return { client, asked, cancel };
}
type Round = {
  resultType?: string;
  requestState?: string;
  inputRequests?: Record<string, { params?: { url?: string } }>;
};

describe('a gated call from a 2026-07-28 client that can open URLs', () => {
  it('is sent to the child’s window, and the client’s own retry runs the call once the passkey landed, exactly once', async () => {
    const args = await order();
    const { cancel, asked } = await modernClient({ onUrl: (windowUrl) => void approveIn(windowUrl, args) });
    const cancelled = await cancel(args);
    expect(cancelled.isError, textOf(cancelled)).toBeFalsy();
    expect(cancelled.structuredContent).toMatchObject({ invoiceId: args.invoiceId, cancelled: true });
    expect(asked).toHaveLength(1);
    const requestId = new URL(asked[0]?.url ?? '').searchParams.get('request') ?? '';
    expect(asked[0]?.url).toBe(`http://localhost:3000/approve?as=child&request=${requestId}`);
    expect(asked[0]?.message).toMatch(/^The child approves or declines exactly this call of pizza__cancel_order/);
    // Spent once, recorded once; the window shows it used.
    expect(await allowsFor(requestId)).toBe(1);
    expect((await household.runtime.identity.callApprovals.get(requestId))?.status).toBe('used');
    // The request's life is on the audit chain, beside the filter's own decision rows.
    expect(await lifeOf(requestId)).toEqual([
      'call-approval-requested info',
      'call-approval-approved allow',
      'call-approval-spent ok',
    ]);
    expect(await stillOpen(args)).toBe('Not cancelled: this order was already cancelled.');
  });

  it('gets input_required with the window and a signed state; a retry after the child declined gets the reason, forwards nothing, and its state is spent', async () => {
    const args = await order();
    const { cancel } = await modernClient({ manual: true });
    const first = await cancel(args);
    expect(first.resultType).toBe('input_required');
    expect(Object.keys(first.inputRequests ?? {})).toEqual(['ask-1:child']);
    const windowUrl = first.inputRequests?.['ask-1:child']?.params?.url ?? '';
    const requestId = new URL(windowUrl).searchParams.get('request') ?? '';
    const opened = { inputResponses: { 'ask-1:child': { action: 'accept' } }, requestState: first.requestState };
    // One character of the state changed: the MAC fails, nothing runs.
    const state = first.requestState ?? '';
    const flipped = `${state.slice(0, -2)}${state.at(-2) === 'A' ? 'B' : 'A'}${state.at(-1)}`;
    await expect(cancel(args, { ...opened, requestState: flipped })).rejects.toThrow(/Invalid or expired requestState/);
    // Declined before the retry arrives: the retry is answered with the reason, not asked afresh.
    await declineIn(windowUrl);
    const declined = await cancel(args, opened);
    expect(declined.isError).toBe(true);
    expect(textOf(declined)).toBe('Refused: the child declined the call. Nothing was sent.');
    expect(declined.structuredContent).toEqual({
      requestId,
      status: 'declined',
      reason: 'the child declined the call',
    });
    expect(textOf(await cancel(args, opened))).toMatch(/already used/);
    expect(await allowsFor(requestId)).toBe(0);
    expect(await lifeOf(requestId)).toEqual(['call-approval-requested info', 'call-approval-declined deny']);
    // Nothing reached the shop: the order is still open, and a fresh approval cancels it.
    expect(await stillOpen(args)).not.toMatch(/Not cancelled/);
  });

  it('a retry held open while the child declines is answered with the reason as soon as the window decides', async () => {
    const args = await order();
    const { cancel } = await modernClient({ manual: true });
    const first = await cancel(args);
    const windowUrl = first.inputRequests?.['ask-1:child']?.params?.url ?? '';
    const requestId = new URL(windowUrl).searchParams.get('request') ?? '';
    // The retry's own 'waits for approval' row: it is in the server, about to long-poll the request.
    const retrying = new Promise<void>((resolve) => {
      const stop = household.runtime.events.subscribe((event) => {
        if (event.kind === 'approval-decision' && event.outcome === 'info' && event.approvalId === requestId) {
          stop();
          resolve();
        }
      });
    });
    const retry = cancel(args, {
      inputResponses: { 'ask-1:child': { action: 'accept' } },
      requestState: first.requestState,
    });
    await retrying;
    await declineIn(windowUrl);
    expect(textOf(await retry)).toBe('Refused: the child declined the call. Nothing was sent.');
  });

  it('a retry after the request expired gets the reason and forwards nothing', async () => {
    const args = await order();
    const { cancel } = await modernClient({ manual: true });
    const first = await cancel(args);
    expect(first.resultType).toBe('input_required');
    const windowUrl = first.inputRequests?.['ask-1:child']?.params?.url ?? '';
    const requestId = new URL(windowUrl).searchParams.get('request') ?? '';
    // Eleven minutes later on the household's clock: the five-minute request has expired.
    writeFileSync(clockFile, String(11 * 60 * 1000));
    const expired = await cancel(args, {
      inputResponses: { 'ask-1:child': { action: 'accept' } },
      requestState: first.requestState,
    });
    expect(textOf(expired)).toBe(
      'Refused: nobody approved the call in time; the agent may ask again. Nothing was sent.',
    );
    expect(expired.structuredContent).toMatchObject({ requestId, status: 'expired' });
    expect(await allowsFor(requestId)).toBe(0);
    expect(await lifeOf(requestId)).toEqual(['call-approval-requested info', 'call-approval-expired deny']);
  });

  it('a client that declares forms only keeps the refusal naming the window', async () => {
    const args = await order();
    const { cancel, asked } = await modernClient({ urls: false });
    const refused = await cancel(args);
    expect(textOf(refused)).toMatch(/^approval_required: pizza__cancel_order runs only after the child/);
    expect(refused.structuredContent).toMatchObject({ approvalRequired: { waitingFor: ['child'] } });
    expect(asked).toEqual([]);
  });
});

describe('a gated call from a 2025-11-25 client that declared URL elicitation', () => {
  it('gets elicitation/create in URL mode, then completion once the child approved, then the call’s result', async () => {
    const args = await order();
    const client = new V1Client(
      { name: 'gated-2025', version: '1.0.0' },
      { capabilities: { elicitation: { url: {} } } },
    );
    const sent: string[] = [];
    const completed: string[] = [];
    client.setRequestHandler(ElicitRequestSchema, (request) => {
      if (request.params.mode !== 'url') throw new Error('expected URL mode');
      sent.push(request.params.elicitationId);
      void approveIn(request.params.url, args);
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
    clients.push(client);
    await client.callTool({ name: 'search_tools', arguments: { query: 'cancel order', top_k: 10 } });
    const cancelled = (await client.callTool({
      name: 'call_tool',
      arguments: { tool_name: tool, arguments: args },
    })) as CallToolResult;
    expect(cancelled.isError, textOf(cancelled)).toBeFalsy();
    expect(cancelled.structuredContent).toMatchObject({ invoiceId: args.invoiceId, cancelled: true });
    expect(sent).toHaveLength(1);
    expect(completed).toEqual(sent);
  });
});
