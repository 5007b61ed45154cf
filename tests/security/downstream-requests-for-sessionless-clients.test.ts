/**
 * Issue 31 (SPEC §3.10, §3.12): a 2026-07-28 client cannot be sent requests in the middle of its
 * call, so a downstream's own questions (a form, a sampling request, a roots listing) reach it as
 * `input_required` rounds while the call waits in the proxy. Driven through the real CLI over
 * loopback HTTP, real downstream processes of both versions, and real v2 clients: the rounds
 * complete; another principal's retry, a replayed retry and a stale one are refused; and a retry
 * that reaches another proxy process is told so, without being spent, so the right one still
 * completes the call.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, type ElicitRequestFormParams, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { startHttpCli } from './fixtures/http-cli';

const ASKING = fileURLToPath(new URL('../transparent/asking-server.ts', import.meta.url));
const MODERN = fileURLToPath(new URL('../fixtures/modern-stdio-fixture-server.ts', import.meta.url));
const alice = 'alice-token-0123456789abcdef';
const bob = 'bob-token-0123456789abcdefgh';
const ROOTS = [{ uri: 'file:///orders', name: 'Orders' }];

const children: ChildProcess[] = [];
const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** A proxy process: `shop` a 2025-only downstream that asks by request, `modern` a 2026 one that asks by `input_required`. */
async function proxy(shared?: { folder: string }): Promise<string> {
  const folder = mkdtempSync(join(tmpdir(), 'emcp-held-'));
  const store = join(shared?.folder ?? folder, 'proxy.sqlite');
  writeFileSync(
    join(folder, 'config.json'),
    JSON.stringify({
      mcpServers: {
        shop: { command: process.execPath, args: ['--import', 'tsx', ASKING, 'shop'], protocol: '2025-11-25' },
        modern: { command: process.execPath, args: ['--import', 'tsx', MODERN], protocol: '2026-07-28' },
      },
    }),
  );
  writeFileSync(join(folder, 'inbound'), `alice=${alice}\nbob=${bob}\n`);
  const cli = await startHttpCli(folder, {
    extra: ['--store', `sqlite:${store}`],
    started: (child) => children.push(child),
  });
  return cli.url;
}

/** A v2 client pinned to 2026-07-28 that can answer forms, sampling and roots; `manual` leaves rounds to the test. */
async function client(url: string, token: string, options: { manual?: boolean } = {}) {
  const forms: ElicitRequestFormParams[] = [];
  const connected = new Client(
    { name: 'sessionless', version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      capabilities: { elicitation: { form: {} }, sampling: {}, roots: {} },
      ...(options.manual && { inputRequired: { autoFulfill: false } }),
    },
  );
  connected.setRequestHandler('elicitation/create', (request) => {
    const form = request.params as ElicitRequestFormParams;
    forms.push(form);
    return {
      action: 'accept',
      content: 'address' in form.requestedSchema.properties ? { address: '1 Main St' } : { name: 'Ada' },
    };
  });
  connected.setRequestHandler('sampling/createMessage', () => ({
    model: 'test-model',
    role: 'assistant',
    content: { type: 'text', text: 'ring twice' },
  }));
  connected.setRequestHandler('roots/list', () => ({ roots: ROOTS }));
  await connected.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  clients.push(connected);
  expect(connected.getProtocolEra()).toBe('modern');
  return { client: connected, forms };
}

const textOf = (result: unknown) =>
  ((result as { content?: { type: string; text?: string }[] }).content ?? []).map((block) => block.text ?? '').join('');

/** `call_tool`'s arguments for `tool`, with the handle a search for `query` returned. */
async function searched(connected: Client, query: string, tool: string, args: Record<string, unknown> = {}) {
  const found = await connected.callTool({ name: 'search_tools', arguments: { query } });
  const handle = (found.structuredContent as { handle?: string }).handle;
  expect(handle).toMatch(/^dh_/);
  return { tool_name: tool, arguments: args, handle };
}

type Round = { resultType?: string; requestState?: string; inputRequests?: Record<string, { method: string }> };

const retry = (connected: Client, args: Record<string, unknown>, requestState: string, inputResponses: unknown) =>
  connected.callTool({ name: 'call_tool', arguments: args, inputResponses, requestState } as never, {
    allowInputRequired: true,
  }) as Promise<Round>;

describe("a downstream's own requests reach a 2026-07-28 client as input rounds (search mode, HTTP)", () => {
  it("a 2025 downstream's form and sampling request, and its roots listing, complete the call", async () => {
    const { client: asAlice, forms } = await client(await proxy(), alice);
    const deliver = await searched(asAlice, 'deliver a pizza asking where', 'shop__deliver', { size: 'large' });
    const delivered = await asAlice.callTool({ name: 'call_tool', arguments: deliver });
    expect(textOf(delivered)).toBe('delivering a large pizza to 1 Main St; note: ring twice');
    expect(forms.map((form) => form.message)).toEqual(['Where should the large pizza go?']);

    const roots = await searched(asAlice, 'lists the client roots', 'shop__list_roots');
    expect(JSON.parse(textOf(await asAlice.callTool({ name: 'call_tool', arguments: roots })))).toEqual(ROOTS);
  });

  it("a 2026 downstream's input_required round reaches the client the same way", async () => {
    const { client: asAlice, forms } = await client(await proxy(), alice);
    const greet = await searched(asAlice, 'greets the caller by name', 'modern__greet');
    expect(textOf(await asAlice.callTool({ name: 'call_tool', arguments: greet }))).toBe('Hello, Ada!');
    expect(forms.map((form) => form.message)).toEqual(['What is your name?']);
  });

  it("refuses another principal's retry, a replay and a stale round; the held call completes once", async () => {
    const url = await proxy();
    const { client: asAlice } = await client(url, alice, { manual: true });
    const deliver = await searched(asAlice, 'deliver a pizza asking where', 'shop__deliver', { size: 'small' });
    const asked = (await asAlice.callTool(
      { name: 'call_tool', arguments: deliver },
      { allowInputRequired: true },
    )) as Round;
    expect(asked.resultType).toBe('input_required');
    expect(Object.values(asked.inputRequests ?? {}).map((request) => request.method)).toEqual(['elicitation/create']);
    const [formKey] = Object.keys(asked.inputRequests ?? {});
    const address = { [formKey ?? '']: { action: 'accept', content: { address: '2 Side St' } } };

    // Bob presents alice's state and answer: refused, and alice's call still waits for her.
    const { client: asBob } = await client(url, bob, { manual: true });
    expect(textOf(await retry(asBob, deliver, asked.requestState ?? '', address))).toMatch(
      /belongs to another request or another client/,
    );

    // Alice answers: the downstream asks its next question (sampling) in a new round.
    const sampling = await retry(asAlice, deliver, asked.requestState ?? '', address);
    expect(sampling.resultType).toBe('input_required');
    expect(Object.values(sampling.inputRequests ?? {}).map((request) => request.method)).toEqual([
      'sampling/createMessage',
    ]);
    // The first state again: a round already answered.
    expect(textOf(await retry(asAlice, deliver, asked.requestState ?? '', address))).toMatch(/earlier round/);

    const [noteKey] = Object.keys(sampling.inputRequests ?? {});
    const note = { [noteKey ?? '']: { model: 'm', role: 'assistant', content: { type: 'text', text: 'no onions' } } };
    const done = await retry(asAlice, deliver, sampling.requestState ?? '', note);
    expect(textOf(done)).toBe('delivering a small pizza to 2 Side St; note: no onions');
    // After completion the last state is spent too: nothing runs twice.
    expect(textOf(await retry(asAlice, deliver, sampling.requestState ?? '', note))).toMatch(/already used/);
  });

  it('a retry that reaches another proxy process is refused unspent; the right process completes the call', async () => {
    const shared = { folder: mkdtempSync(join(tmpdir(), 'emcp-held-shared-')) };
    const [first, second] = await Promise.all([proxy(shared), proxy(shared)]);
    const { client: viaFirst } = await client(first ?? '', alice, { manual: true });
    const { client: viaSecond } = await client(second ?? '', alice, { manual: true });
    const deliver = await searched(viaFirst, 'deliver a pizza asking where', 'shop__deliver', { size: 'large' });
    const asked = (await viaFirst.callTool(
      { name: 'call_tool', arguments: deliver },
      { allowInputRequired: true },
    )) as Round;
    expect(asked.resultType).toBe('input_required');
    const [formKey] = Object.keys(asked.inputRequests ?? {});
    const address = { [formKey ?? '']: { action: 'accept', content: { address: '3 Far Rd' } } };

    const elsewhere = await retry(viaSecond, deliver, asked.requestState ?? '', address);
    expect(textOf(elsewhere)).toMatch(/belongs to another proxy instance/);
    const next = await retry(viaFirst, deliver, asked.requestState ?? '', address);
    expect(next.resultType).toBe('input_required');
    expect(Object.values(next.inputRequests ?? {}).map((request) => request.method)).toEqual([
      'sampling/createMessage',
    ]);
  });
});
