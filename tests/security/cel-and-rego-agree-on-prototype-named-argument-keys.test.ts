import { mkdtempSync, rmSync } from 'node:fs';
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

// Issue 11 item 14: arguments with keys named like Object.prototype members (`constructor`,
// `__proto__`, `toString`) made the CEL twin of the spend-limit bundle fault ("Unsupported
// type") while Rego decided normally. Both engines must see the same input shape and so reach
// the same outcome, end to end through the governed gateway.
const requester = fixtureParty('requester');
const approver = fixtureParty('approver');
const trust = spendLimitTrust(requester, approver);
const directory = new URL('../../policies/spend-limit', import.meta.url).pathname;

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

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function governedGateway(engine: 'rego' | 'cel') {
  const received: unknown[] = [];
  const bundle = await loadBundle({ directory, builtins: createHostBuiltins(), engine });
  const folder = mkdtempSync(join(tmpdir(), 'emcp-evidence-'));
  const store = await openSqliteEvidenceStore({ path: join(folder, 'evidence.sqlite'), capacity: 1_000 });
  const resolve = createRouteResolver({ routes: [{ name: 'bank', bundle: 'spend-limit' }], unmapped: 'refuse' });
  const governed = singleUseFilter({
    inner: policyFilter({ bundle, config: { trust }, now: () => FIXTURE_NOW * 1000 }),
    store,
    evidenceFields: ['requesterCredential', 'approverCredential'],
    now: () => FIXTURE_NOW * 1000,
  });
  const gateway: Gateway = createGateway({
    servers: { bank: { kind: 'in-process', server: bankServer(received) } },
    embeddings: false,
    logger: memoryLogger(),
    governance: { resolve, bundles: { 'spend-limit': { bundle, filter: governed } } },
  });
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }));
  cleanups.push(() => gateway.close());
  await gateway.start();
  const client = await connectClient(gateway);
  await client.callTool({ name: 'search_tools', arguments: { query: 'pay an amount to a payee' } });
  return { client, received };
}

// Extra argument members, written as JSON so `__proto__` is an own key, not a prototype change.
const EXTRAS: readonly [string, string][] = [
  ['constructor', '{"constructor": {"name": "Object"}}'],
  ['constructor (string)', '{"constructor": "x"}'],
  ['__proto__', '{"__proto__": {"admin": true}}'],
  ['toString', '{"toString": "x"}'],
  ['nested constructor', '{"memo": {"constructor": {"prototype": 1}, "toString": [1]}}'],
  ['all at once', '{"constructor": 1, "__proto__": {"x": 1}, "toString": 2, "valueOf": {"hasOwnProperty": 3}}'],
];

async function outcomes(engine: 'rego' | 'cel') {
  const { client, received } = await governedGateway(engine);
  const seen: { label: string; amountCents: number; isError: boolean; text: string; reached: number }[] = [];
  for (const [label, json] of EXTRAS) {
    for (const amountCents of [500, 1500]) {
      const before = received.length;
      const credential = spendCredential({
        issuer: requester,
        type: 'SpendRequest',
        amountCents,
        jti: `urn:uuid:${engine}-${label.replaceAll(' ', '-')}-${amountCents}`,
      });
      const args = {
        ...(JSON.parse(json) as Record<string, unknown>),
        amountCents,
        payee: FIXTURE_PAYEE,
        requesterCredential: credential,
      };
      const result = await callTool(client, 'bank__pay', args);
      seen.push({
        label,
        amountCents,
        isError: result.isError === true,
        text: textOf(result),
        reached: received.length - before,
      });
    }
  }
  return seen;
}

describe('Rego and CEL decide prototype-named argument keys identically', () => {
  it('gives the same outcome on both engines, and neither faults', async () => {
    const rego = await outcomes('rego');
    const cel = await outcomes('cel');
    expect(cel).toEqual(rego);
    for (const outcome of cel) expect(outcome.text).not.toMatch(/could not be evaluated/);
    // The bundle binds its arguments: an unexpected `constructor` is a decided refusal on both.
    expect(cel.find((outcome) => outcome.label === 'constructor' && outcome.amountCents === 500)).toMatchObject({
      isError: true,
      reached: 0,
      text: expect.stringContaining('unexpected `constructor` in arguments'),
    });
  });
});
