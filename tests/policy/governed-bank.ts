import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import { Server } from '@modelcontextprotocol/server';
import { FIXTURE_NOW, fixtureParty, spendLimitTrust } from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import {
  createGateway,
  createHostBuiltins,
  createRouteResolver,
  type EvidenceStore,
  type Gateway,
  loadBundle,
  openSqliteEvidenceStore,
  type PolicyBundle,
  policyFilter,
  singleUseFilter,
} from '../../proxy/index';
import { connectClient, memoryLogger } from '../proxy/helpers';

/** The spend-limit fixtures' parties and the trust the bundle is configured with. */
export const requester = fixtureParty('requester');
export const approver = fixtureParty('approver');
export const trust = spendLimitTrust(requester, approver);
const directory = new URL('../../policies/spend-limit', import.meta.url).pathname;

/** A bank MCP server that records the raw arguments of every call it receives. */
export function bankServer(received: unknown[]): Server {
  const server = new Server({ name: 'bank', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler('tools/list', () => ({
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
  server.setRequestHandler('tools/call', (request) => {
    received.push(request.params.arguments);
    return { content: [{ type: 'text', text: 'paid' }] };
  });
  return server;
}

/** What {@link governedBank} started. */
export interface GovernedBank {
  readonly gateway: Gateway;
  /** A real SDK client that has already searched for the bank's tool. */
  readonly client: Client;
  /** The arguments the bank really received. */
  readonly received: unknown[];
  readonly bundle: PolicyBundle;
  /** What `search_tools` answered (the augmented schema). */
  readonly found: unknown;
  close(): Promise<void>;
}

/**
 * The governed flow end to end: the spend-limit bundle on `engine`, single-use evidence on a
 * fresh SQLite file (or `store`), routed by the admission facts the gateway stamps on `bank`,
 * with the clock at the fixtures' `FIXTURE_NOW`.
 */
export async function governedBank(options: {
  readonly engine: 'rego' | 'cel';
  readonly store?: EvidenceStore;
  readonly onError?: (error: unknown) => void;
}): Promise<GovernedBank> {
  const received: unknown[] = [];
  const bundle = await loadBundle({ directory, builtins: createHostBuiltins(), engine: options.engine });
  const folder = mkdtempSync(join(tmpdir(), 'emcp-evidence-'));
  const store =
    options.store ?? (await openSqliteEvidenceStore({ path: join(folder, 'evidence.sqlite'), capacity: 1_000 }));
  const now = () => FIXTURE_NOW * 1000;
  const governed = singleUseFilter({
    inner: policyFilter({ bundle, config: { trust }, now }),
    store,
    evidenceFields: ['requesterCredential', 'approverCredential'],
    now,
    ...(options.onError && { onError: options.onError }),
  });
  const gateway = createGateway({
    servers: { bank: { kind: 'in-process', server: bankServer(received) } },
    embeddings: false,
    logger: memoryLogger(),
    governance: {
      resolve: createRouteResolver({ routes: [{ name: 'bank', bundle: 'spend-limit' }], unmapped: 'refuse' }),
      bundles: { 'spend-limit': { bundle, filter: governed } },
    },
  });
  await gateway.start();
  const client = await connectClient(gateway);
  const found = await client.callTool({ name: 'search_tools', arguments: { query: 'pay an amount to a payee' } });
  return {
    gateway,
    client,
    received,
    bundle,
    found,
    async close() {
      await client.close();
      await gateway.close();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}
