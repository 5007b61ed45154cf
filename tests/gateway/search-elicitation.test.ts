import type { Client } from '@modelcontextprotocol/client';
import type { ElicitRequestFormParams, ElicitResult } from '@modelcontextprotocol/server';
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  FIXTURE_NOW,
  FIXTURE_PAYEE,
  fixtureParty,
  spendCredential,
  spendLimitTrust,
} from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import {
  connectInMemory,
  createRouteResolver,
  elicitationFilter,
  type Gateway,
  type GatewayOptions,
  policyFilter,
} from '../../proxy/index';
import { callTool, textOf } from '../proxy/helpers';
import { bankServer, cleanupStack, loadSpendLimit, startedGateway } from './support';

// SPEC §3.10 in search mode: the elicitation middleware as a call filter asks the human for a
// missing field through a form in the chat; it never asks for a governed tool's credential.
const cleanups = cleanupStack();
afterEach(() => cleanups.run());

/** A pizza shop with one tool that needs a delivery address. */
function pizzaServer(received: unknown[]): McpServer {
  const server = new McpServer({ name: 'pizza', version: '1.0.0' });
  server.registerTool(
    'order',
    {
      description: 'Order a pizza for delivery',
      inputSchema: z.object({
        size: z.enum(['small', 'large']).describe('Pizza size'),
        address: z.string().describe('Delivery address'),
      }),
    },
    (args) => {
      received.push(args);
      return { content: [{ type: 'text', text: `ordered a ${args.size} pizza to ${args.address}` }] };
    },
  );
  return server;
}

/** A real SDK client; with `answer`, it declares form elicitation and answers every form with it. */
async function connect(
  gateway: Gateway,
  answer?: (params: ElicitRequestFormParams) => ElicitResult,
): Promise<{ client: Client; forms: ElicitRequestFormParams[] }> {
  const forms: ElicitRequestFormParams[] = [];
  const client = await connectInMemory(gateway, {
    principal: { id: 'test' },
    ...(answer && { capabilities: { elicitation: { form: {} } } }),
  });
  cleanups.push(() => client.close());
  if (answer) {
    client.setRequestHandler('elicitation/create', (request) => {
      if (!('requestedSchema' in request.params)) throw new Error('only form elicitation is expected');
      forms.push(request.params);
      return answer(request.params);
    });
  }
  return { client, forms };
}

async function search(
  client: Client,
  query: string,
): Promise<{ name: string; input_schema: { required?: string[] } }[]> {
  const found = await client.callTool({ name: 'search_tools', arguments: { query } });
  return (JSON.parse(textOf(found)) as { results: { name: string; input_schema: { required?: string[] } }[] }).results;
}

describe('search-mode elicitation (elicitationFilter as a call filter)', () => {
  async function pizzaGateway(received: unknown[]) {
    return startedGateway(cleanups, {
      servers: { pizza: { kind: 'in-process', server: pizzaServer(received) } },
      extraCallFilters: [elicitationFilter()],
    });
  }

  it('asks the human for a missing address through a form, and the tool gets the merged arguments', async () => {
    const received: unknown[] = [];
    const { client, forms } = await connect(await pizzaGateway(received), () => ({
      action: 'accept',
      content: { address: '1 Main St', size: 'small' },
    }));
    expect((await search(client, 'order a pizza for delivery')).map((hit) => hit.name)).toContain('pizza__order');
    const result = await callTool(client, 'pizza__order', { size: 'large' });
    expect(textOf(result)).toBe('ordered a large pizza to 1 Main St');
    // Only the missing field was asked for, and only the requested key was merged.
    expect(forms).toHaveLength(1);
    expect(Object.keys(forms[0]?.requestedSchema.properties ?? {})).toEqual(['address']);
    expect(forms[0]?.requestedSchema.required).toEqual(['address']);
    expect(received).toEqual([{ size: 'large', address: '1 Main St' }]);
  });

  it('a client without the elicitation capability gets a structured refusal, and nothing runs', async () => {
    const received: unknown[] = [];
    const { client } = await connect(await pizzaGateway(received));
    await search(client, 'order a pizza for delivery');
    const result = await callTool(client, 'pizza__order', { size: 'large' });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({
      error: 'tool_call_blocked',
      tool: 'pizza__order',
      status: 'needs_input',
      reason: 'elicitation_unsupported',
      missing_or_ambiguous: ['address'],
    });
    expect(received).toEqual([]);
  });
});

describe('elicitation never asks for a governed credential (SPEC §3.10, §4.5)', () => {
  const requester = fixtureParty('requester');
  const approver = fixtureParty('approver');

  async function bankGateway(received: unknown[]) {
    const bundle = await loadSpendLimit();
    const options: GatewayOptions = {
      // The bank's own schema also requires the credential, so the elicitation filter sees it as required.
      servers: { bank: { kind: 'in-process', server: bankServer({ received, declaresCredential: true }) } },
      extraCallFilters: [elicitationFilter()],
      governance: {
        resolve: createRouteResolver({ routes: [{ name: 'bank', bundle: 'spend-limit' }], unmapped: 'pass' }),
        bundles: {
          'spend-limit': {
            bundle,
            filter: policyFilter({
              bundle,
              config: { trust: spendLimitTrust(requester, approver) },
              now: () => FIXTURE_NOW * 1000,
            }),
          },
        },
      },
    };
    return startedGateway(cleanups, options);
  }

  it('a missing credential gets the policy guidance, and no form is sent', async () => {
    const received: unknown[] = [];
    const { client, forms } = await connect(await bankGateway(received), () => ({
      action: 'accept',
      content: { requesterCredential: 'typed into a form' },
    }));
    const [hit] = await search(client, 'pay an amount to a payee');
    expect(hit?.name).toBe('bank__pay');
    expect(hit?.input_schema.required).toContain('requesterCredential');
    const result = await callTool(client, 'bank__pay', { amountCents: 500, payee: FIXTURE_PAYEE });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^Refused by the spending policy: the call is missing `requesterCredential`/);
    expect(forms).toEqual([]);
    expect(received).toEqual([]);
  });

  it('asks only for the ordinary missing field; the credential still comes back as guidance', async () => {
    const received: unknown[] = [];
    const { client, forms } = await connect(await bankGateway(received), () => ({
      action: 'accept',
      content: { payee: FIXTURE_PAYEE },
    }));
    await search(client, 'pay an amount to a payee');
    const result = await callTool(client, 'bank__pay', { amountCents: 500 });
    expect(forms.map((form) => Object.keys(form.requestedSchema.properties))).toEqual([['payee']]);
    expect(textOf(result)).toMatch(/^Refused by the spending policy: the call is missing `requesterCredential`/);
    expect(received).toEqual([]);
  });

  it('an elicited field reaches the policy, which allows a valid credential and strips it', async () => {
    const received: unknown[] = [];
    const { client, forms } = await connect(await bankGateway(received), () => ({
      action: 'accept',
      content: { payee: FIXTURE_PAYEE },
    }));
    await search(client, 'pay an amount to a payee');
    const requesterCredential = spendCredential({
      issuer: requester,
      type: 'SpendRequest',
      amountCents: 500,
      jti: 'urn:uuid:search-elicitation-ok',
    });
    const result = await callTool(client, 'bank__pay', { amountCents: 500, requesterCredential });
    expect(textOf(result)).toBe('paid');
    expect(forms).toHaveLength(1);
    expect(received).toEqual([{ amountCents: 500, payee: FIXTURE_PAYEE }]);
  });
});
