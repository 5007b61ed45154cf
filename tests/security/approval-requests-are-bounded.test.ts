import type { CallToolResult, Client } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectInMemory } from '../../proxy/index';
import { startTestHousehold, type TestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';

// Issue 26 defect 6: 50 anonymous chat sessions created 50 pending approval requests in about two
// seconds and flooded the approval windows. Now a caller (a chat's MCP session, or an /mcp
// principal) holds at most 3 pending requests, the household at most 20, and a caller gets at
// most 10 invoices a minute. Driven through the real proxy on the composed household (the real
// shop over stdio): a real request first, then 50 sessions flooding at once.
let household: TestHousehold;

beforeAll(async () => {
  household = await startTestHousehold();
}, 120_000);
afterAll(async () => {
  await household?.close();
});

/** A session of its own on the embedded proxy, as a chat opens one, with the tools discovered. */
async function session(name: string) {
  const client: Client = await connectInMemory(household.runtime.gateway, { name, principal: { id: `chat:${name}` } });
  for (const query of ['pizza invoice order', 'request approval household']) {
    await client.callTool({ name: 'search_tools', arguments: { query, top_k: 50 } });
  }
  const call = async (tool: string, args: Record<string, unknown>) => {
    const result = (await client.callTool({
      name: 'call_tool',
      arguments: { tool_name: tool, arguments: args },
    })) as CallToolResult;
    const text = textOf(result);
    return result.isError ? { ok: false as const, text } : { ok: true as const, json: JSON.parse(text) };
  };
  return {
    client,
    async invoice(deliverTo: string) {
      return call('pizza__request_invoice', { items: [{ sku: 'cheese-slice', qty: 1 }], deliverTo });
    },
    async requestApproval(invoice: string) {
      return call('request_approval', { invoice });
    },
  };
}

describe('approval requests are bounded per caller and per household', () => {
  let realApprovalId: string;
  const refusals: string[] = [];
  const accepted = new Map<string, number>();

  it('a real request first, then 50 sessions flood at once: at most 3 each and 20 in all are created', async () => {
    const real = await session('real-child');
    const invoice = await real.invoice('12 Main St');
    if (!invoice.ok) throw new Error(invoice.text);
    const request = await real.requestApproval(String(invoice.json.invoice));
    if (!request.ok) throw new Error(request.text);
    realApprovalId = String(request.json.approvalId);

    await Promise.all(
      Array.from({ length: 50 }, async (_, index) => {
        const flooder = await session(`flood-${index}`);
        for (let attempt = 0; attempt < 4; attempt++) {
          const flood = await flooder.invoice(`${index} Flood St, attempt ${attempt}`);
          if (!flood.ok) throw new Error(flood.text);
          const outcome = await flooder.requestApproval(String(flood.json.invoice));
          if (outcome.ok) accepted.set(`flood-${index}`, (accepted.get(`flood-${index}`) ?? 0) + 1);
          else refusals.push(outcome.text);
        }
        await flooder.client.close();
      }),
    );

    // Per caller: never more than 3.
    expect(Math.max(...accepted.values())).toBeLessThanOrEqual(3);
    // Per household: 20 pending in all, the real one among them; every other attempt was refused in words.
    const pending = await household.runtime.identity.approvals.pendingFor('child');
    expect(pending).toHaveLength(20);
    expect([...accepted.values()].reduce((sum, count) => sum + count, 0)).toBe(19);
    expect(refusals).toHaveLength(200 - 19);
    expect(refusals.every((text) => /approval requests waiting/.test(text))).toBe(true);
    expect(refusals.some((text) => /The household already has 20 approval requests waiting/.test(text))).toBe(true);
  });

  it('the approval windows show the oldest real request first: the flood cannot push it out of sight', async () => {
    const pending = await household.runtime.identity.approvals.pendingFor('child');
    // The whole list fits a window (the household cap), and the real request heads it.
    expect(pending.length).toBeLessThanOrEqual(20);
    expect(pending[0]?.approvalId).toBe(realApprovalId);
    expect(pending[0]?.terms.deliverTo).toBe('12 Main St');
    // What the child's window fetches (GET /api/identity/pending) is this list, oldest first, whole.
    const created = pending.map((view) => Date.parse(view.expiresAt));
    expect(created).toEqual([...created].sort((a, b) => a - b));
  });

  it('one caller asking again and again is held at 3, with the reason; a decision frees its slot', async () => {
    // The child declines everything waiting, so the household cap is out of the way.
    for (const view of await household.runtime.identity.approvals.pendingFor('child')) {
      expect(
        (await household.runtime.identity.approvals.decline({ approvalId: view.approvalId, role: 'child' })).ok,
      ).toBe(true);
    }
    const greedy = await session('greedy');
    const outcomes: Array<{ ok: boolean; text?: string; json?: { approvalId: string } }> = [];
    for (let index = 0; index < 4; index++) {
      const invoice = await greedy.invoice(`${index} Greedy Rd`);
      if (!invoice.ok) throw new Error(invoice.text);
      outcomes.push(await greedy.requestApproval(String(invoice.json.invoice)));
    }
    expect(outcomes.map((outcome) => outcome.ok)).toEqual([true, true, true, false]);
    expect(outcomes[3]?.text).toMatch(/This chat already has 3 approval requests waiting \(at most 3\)/);
    // A decision frees a slot: the next ask goes through.
    const first = outcomes[0]?.json?.approvalId as string;
    expect((await household.runtime.identity.approvals.decline({ approvalId: first, role: 'child' })).ok).toBe(true);
    const again = await greedy.invoice('5 Greedy Rd');
    if (!again.ok) throw new Error(again.text);
    expect((await greedy.requestApproval(String(again.json.invoice))).ok).toBe(true);
    await greedy.client.close();
  });

  it('a caller gets at most 10 invoices a minute; the 11th is refused and names the wait', async () => {
    const hasty = await session('hasty');
    for (let index = 0; index < 10; index++) {
      const invoice = await hasty.invoice(`${index} Hasty Ave`);
      expect(invoice.ok, invoice.ok ? '' : invoice.text).toBe(true);
    }
    const eleventh = await hasty.invoice('11 Hasty Ave');
    expect(eleventh.ok).toBe(false);
    expect(eleventh.ok ? '' : eleventh.text).toMatch(/At most 10 invoices a minute per chat: ask again in \d+ s/);
    // Another caller is not held by this one's budget.
    const other = await session('other');
    expect((await other.invoice('1 Other Way')).ok).toBe(true);
    await hasty.client.close();
    await other.client.close();
  });
});
