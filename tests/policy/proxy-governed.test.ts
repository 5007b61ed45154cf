import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  FIXTURE_NOW,
  FIXTURE_PAYEE,
  fixtureParty,
  spendCredential,
  spendLimitTrust,
} from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import {
  createGateway,
  createHostBuiltins,
  createRouteResolver,
  type Gateway,
  loadBundle,
  openSqliteEvidenceStore,
  policyFilter,
  singleUseFilter,
} from '../../proxy/index';
import { callTool, connectClient, memoryLogger, textOf } from '../proxy/helpers';

// End to end through the real proxy: a governed in-process "bank" server behind the router,
// single-use evidence and the spend-limit bundle. Asserts on what the downstream really received.
const requester = fixtureParty('requester');
const approver = fixtureParty('approver');
const trust = spendLimitTrust(requester, approver);
const directory = new URL('../../policies/spend-limit', import.meta.url).pathname;

/** A bank MCP server that records the raw arguments of every call it receives. */
function bankServer(received: unknown[]): Server {
  const server = new Server({ name: 'bank', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: [
      {
        name: 'pay',
        description: 'Pay an amount in cents to a payee',
        inputSchema: {
          type: 'object',
          properties: { amountCents: { type: 'integer' }, payee: { type: 'string' } },
          required: ['amountCents', 'payee'],
        },
      },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, (request) => {
    received.push(request.params.arguments);
    return { content: [{ type: 'text', text: 'paid' }] };
  });
  return server;
}

const proxies: Gateway[] = [];
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
});

describe.each(['rego', 'cel'] as const)('a governed downstream behind the proxy (%s)', (engine) => {
  async function setup() {
    const received: unknown[] = [];
    const bundle = await loadBundle({ directory, builtins: createHostBuiltins(), engine });
    const store = await openSqliteEvidenceStore({
      path: join(mkdtempSync(join(tmpdir(), 'emcp-evidence-')), 'evidence.sqlite'),
      capacity: 1_000,
    });
    // The router reads the admission facts the gateway stamps: nothing is fed back by the host.
    const resolve = createRouteResolver({ routes: [{ name: 'bank', bundle: 'spend-limit' }], unmapped: 'refuse' });
    const governed = singleUseFilter({
      inner: policyFilter({ bundle, config: { trust }, now: () => FIXTURE_NOW * 1000 }),
      store,
      evidenceFields: ['requesterCredential', 'approverCredential'],
      now: () => FIXTURE_NOW * 1000,
    });
    const proxy = createGateway({
      servers: { bank: { kind: 'in-process', server: bankServer(received) } },
      embeddings: false,
      logger: memoryLogger(),
      governance: { resolve, bundles: { 'spend-limit': { bundle, filter: governed } } },
    });
    proxies.push(proxy);
    await proxy.start();
    const client = await connectClient(proxy);
    const found = await client.callTool({ name: 'search_tools', arguments: { query: 'pay an amount to a payee' } });
    return { client, received, found: textOf(found) };
  }

  it('advertises the credential parameters, strips them before the downstream, and spends evidence once', async () => {
    const { client, received, found } = await setup();
    expect(found).toContain('requesterCredential');
    const credential = spendCredential({
      issuer: requester,
      type: 'SpendRequest',
      amountCents: 500,
      jti: `urn:uuid:${engine}-ok`,
    });
    const args = { amountCents: 500, payee: FIXTURE_PAYEE, requesterCredential: credential };
    expect(textOf(await callTool(client, 'bank__pay', args))).toBe('paid');
    expect(received).toEqual([{ amountCents: 500, payee: FIXTURE_PAYEE }]);
    const replay = await callTool(client, 'bank__pay', args);
    expect(replay.isError).toBe(true);
    expect(textOf(replay)).toMatch(/already been used/);
    expect(received).toHaveLength(1);
  });

  it('refuses a tampered amount and nothing reaches the downstream', async () => {
    const { client, received } = await setup();
    const credential = spendCredential({
      issuer: requester,
      type: 'SpendRequest',
      amountCents: 500,
      jti: `urn:uuid:${engine}-tamper`,
    });
    const refused = await callTool(client, 'bank__pay', {
      amountCents: 900,
      payee: FIXTURE_PAYEE,
      requesterCredential: credential,
    });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).not.toContain(credential);
    expect(received).toEqual([]);
    // The refused call spent nothing: the same evidence still works for its own amount.
    expect(
      textOf(
        await callTool(client, 'bank__pay', {
          amountCents: 500,
          payee: FIXTURE_PAYEE,
          requesterCredential: credential,
        }),
      ),
    ).toBe('paid');
  });

  it('refuses an amount over the limit without the approver, naming what is missing', async () => {
    const { client, received } = await setup();
    const credential = spendCredential({
      issuer: requester,
      type: 'SpendRequest',
      amountCents: 1500,
      jti: `urn:uuid:${engine}-big`,
    });
    const refused = await callTool(client, 'bank__pay', {
      amountCents: 1500,
      payee: FIXTURE_PAYEE,
      requesterCredential: credential,
    });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/approverCredential/);
    expect(received).toEqual([]);
  });
});
