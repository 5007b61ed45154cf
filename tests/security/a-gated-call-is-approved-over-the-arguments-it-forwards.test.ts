/**
 * Issue 29, `approval_required`: the passkey signs the hash of exactly the call that runs, so the
 * filter must hash the arguments as they will be forwarded, after every call filter that may change
 * them. Elicitation is such a filter: a person fills in a missing required field, and that value
 * is forwarded. Were the approval asked before it, the window would show (and the passkey sign) a
 * call without the field, and the downstream would run one with it: an argument forwarded that
 * nobody approved. A real SDK client and gateway, an in-process shop, the real elicitation filter
 * as the household composes it (an extra call filter), and a gate that approves exactly the hash it
 * was asked for.
 */
import type { Client } from '@modelcontextprotocol/client';
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  type CallApprovalGate,
  connectInMemory,
  elicitationFilter,
  type GatedCall,
  openSqliteEvidenceStore,
} from '../../proxy/index';
import { cleanupStack, startedGateway } from '../gateway/support';
import { callTool, textOf } from '../proxy/helpers';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

/** A shop whose `cancel_order` needs a reason; it records the arguments of every call it runs. */
function shop(received: unknown[]): McpServer {
  const server = new McpServer({ name: 'pizza', version: '1.0.0' });
  server.registerTool(
    'cancel_order',
    {
      description: 'Cancel a pizza order that is not delivered yet',
      inputSchema: z.object({
        invoiceId: z.string().describe('The order to cancel'),
        reason: z.string().describe('Why the order is cancelled'),
      }),
    },
    (args) => {
      received.push(args);
      return { content: [{ type: 'text', text: `cancelled ${args.invoiceId}` }] };
    },
  );
  return server;
}

/** A gate that has the child's approval of every call it is asked about, over exactly the hash it was given. */
function approvingGate(asked: GatedCall[]): CallApprovalGate {
  return {
    async check(call) {
      asked.push(call);
      return {
        status: 'approved',
        requestId: `r${asked.length}`,
        approvals: [{ role: 'child', credential: call.callHash }],
      };
    },
    async verify(call, approval) {
      return approval.credential === call.callHash
        ? { verified: true, id: `jti-${approval.credential}`, expiresAt: Date.now() + 60_000 }
        : { verified: false, reason: 'it approves other arguments than this call has' };
    },
    async markUsed() {},
    async wait() {
      return undefined;
    },
  };
}

describe('approval_required behind elicitation', () => {
  it('is asked about the call with the field the person filled in, the call the shop then runs', async () => {
    const received: unknown[] = [];
    const asked: GatedCall[] = [];
    const store = openSqliteEvidenceStore({ path: ':memory:', capacity: 100 });
    cleanups.push(() => store.close());
    const gateway = await startedGateway(cleanups, {
      servers: { pizza: { kind: 'in-process', server: shop(received) } },
      extraCallFilters: [elicitationFilter()],
      approvalRequired: {
        rules: [{ tool: 'pizza__cancel_order', roles: ['child'] }],
        gate: approvingGate(asked),
        store,
      },
    });
    const client: Client = await connectInMemory(gateway, {
      principal: { id: 'test' },
      capabilities: { elicitation: { form: {} } },
    });
    cleanups.push(() => client.close());
    client.setRequestHandler('elicitation/create', () => ({ action: 'accept', content: { reason: 'ordered twice' } }));
    await client.callTool({ name: 'search_tools', arguments: { query: 'cancel a pizza order' } });

    const result = await callTool(client, 'pizza__cancel_order', { invoiceId: 'inv-1' });

    expect(textOf(result)).toBe('cancelled inv-1');
    expect(received).toEqual([{ invoiceId: 'inv-1', reason: 'ordered twice' }]);
    // The one call the approval was asked for is the one forwarded, the person's field included.
    expect(asked.map((call) => call.arguments)).toEqual([{ invoiceId: 'inv-1', reason: 'ordered twice' }]);
  });
});
