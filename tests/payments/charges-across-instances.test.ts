/**
 * Money under concurrency over two instances (issue 28, SPEC §4.7, §11): two household runtimes on
 * one PostgreSQL database, sharing the data folder's key file as two app instances do, each
 * serving its proxy over real HTTP at `/mcp`. Fifty charges of one approved order, half through
 * each instance at once, make exactly one charge on the rail and one receipt; a second approval of
 * the paid order is refused on either instance. A decision recorded through B, on an order or on a
 * gated call, wakes the wait on A as it commits: both instances poll the store only every ten
 * minutes here, so nothing but the store's notification can end the wait before its deadline.
 * B, started while A was alive and holding the checkpoint lease, reports none of A's rows as
 * unvouched (A signs them).
 */
import { type CallToolResult, Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callHashOf, serveHttp } from '../../proxy/index';
import { assertCall } from '../identity/call-approval-support';
import { textOf } from '../proxy/helpers';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../support/postgres';
import { startTestHousehold, type TestHousehold } from './household';

const token = 'charges-across-instances-0123456789';
let url: string;
let a: TestHousehold;
let b: TestHousehold;
let bClosed = false;
const closers: (() => Promise<void>)[] = [];
/** How often a waiting approval reads the store here: longer than any wait, so only a notification wakes one. */
const approvalPollMs = 10 * 60 * 1000;
/**
 * A wait's deadline, beyond the test's own timeout: a wait reads the store once more at its
 * deadline, so a wait nothing woke would end only then, and the test fails by its timeout first.
 */
const waitMs = approvalPollMs;
/** The timeout of a test whose wait only a notification can end in time. */
const wakeTestMs = 60_000;

/** A 2026 client over HTTP to `endpoint`, having searched for the charge tool: its `call_tool` of the charge. */
async function chargeThrough(endpoint: string): Promise<(args: Record<string, unknown>) => Promise<CallToolResult>> {
  const client = new Client({ name: 'charges-two-instances', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(endpoint), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  closers.push(() => client.close());
  const found = (await client.callTool({
    name: 'search_tools',
    arguments: { query: 'pay charge invoice payment', top_k: 50 },
  })) as { structuredContent?: { handle?: string; results?: { name: string }[] } };
  expect(found.structuredContent?.results?.map((hit) => hit.name)).toContain('payments__charge_invoice');
  const handle = found.structuredContent?.handle;
  return (args) =>
    client.callTool({
      name: 'call_tool',
      arguments: { tool_name: 'payments__charge_invoice', arguments: args, ...(handle !== undefined && { handle }) },
    }) as Promise<CallToolResult>;
}

/** One number the database answers, read as an operator would. */
async function scalar(sql: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return Number(Object.values((await client.query(sql)).rows[0] ?? {})[0]);
  } finally {
    await client.end();
  }
}

it.skipIf(postgresAvailable)(`charges across two instances are skipped: ${postgresUnavailable}`, () => {});

describe.skipIf(!postgresAvailable)('charges of one order through two instances on one database', () => {
  beforeAll(async () => {
    url = await createTestDatabase();
    a = await startTestHousehold({ env: { DATABASE_URL: url }, approvalPollMs });
    // The second instance: the same database and key file, the household and its members found there.
    b = await startTestHousehold({ dataDir: a.dataDir, enrol: false, env: { DATABASE_URL: url }, approvalPollMs });
  }, 120_000);

  afterAll(async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
    if (!bClosed) await b?.close();
    await a?.close();
  });

  it(
    'an approval recorded through B wakes the wait on A as it commits, not at its next poll',
    async () => {
      const { invoice } = (await a.invoice([{ sku: 'large-pepperoni', qty: 1 }])) as { invoice: string };
      const { json } = await a.call('request_approval', { invoice }, 'request approval household');
      const approvalId = String(json?.approvalId);
      const waiting = a.runtime.identity.approvals.wait({ approvalId, timeoutMs: waitMs });
      for (const role of ['child', 'parent'] as const) {
        const member = a.members[role];
        const started = await b.runtime.identity.passkeys.approval.options({ session: member.session, approvalId });
        if (!started.ok) throw new Error(started.reason);
        const approved = await b.runtime.identity.passkeys.approval.verify({
          session: member.session,
          ceremonyId: started.ceremonyId,
          response: member.authenticator.assert(started.options),
        });
        expect(approved.verified).toBe(true);
      }
      expect((await waiting).status).toBe('approved');
    },
    wakeTestMs,
  );

  it(
    'a gated call approved through B wakes the gate waiting on A as it commits',
    async () => {
      const { invoiceId } = (await a.invoice([{ sku: 'cheese-slice', qty: 1 }])) as { invoiceId: string };
      const call = { tool: 'pizza__cancel_order', arguments: { invoiceId, reason: 'ordered twice' } };
      const checked = await a.runtime.identity.callApprovals.gate.check({
        ...call,
        callHash: callHashOf(call),
        roles: ['child'],
      });
      if (checked.status !== 'pending') throw new Error(`the call is ${checked.status}, not waiting for the child`);
      const waiting = a.runtime.identity.callApprovals.wait({ requestId: checked.requestId, timeoutMs: waitMs });
      const approved = await b.runtime.identity.callApprovals.approve({
        requestId: checked.requestId,
        role: 'child',
        assertion: assertCall(a.members.child.authenticator, callHashOf(call)),
      });
      expect(approved).toMatchObject({ ok: true });
      expect((await waiting).status).toBe('approved');
    },
    wakeTestMs,
  );

  it('50 at once, half through each instance: one charge on the rail, one receipt', async () => {
    const endpoints: string[] = [];
    for (const household of [a, b]) {
      const served = await serveHttp(household.runtime.gateway, { inboundTokens: [{ name: 'external', token }] });
      closers.push(() => served.close());
      endpoints.push(served.url);
    }
    const through = await Promise.all(endpoints.map(chargeThrough));
    // A $15 order: the child and the parent approve it, on A.
    const { invoiceId, approvalId, evidence } = await a.approved('large-pepperoni');
    const args = { invoiceId, amountCents: 1500, merchantId: a.runtime.merchant?.did, ...evidence };
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, index) => {
        const charge = through[index % 2];
        if (charge === undefined) throw new Error('two instances');
        return charge(args);
      }),
    );
    const receipts = new Set<string>();
    for (const result of results) {
      const text = textOf(result);
      if (text.startsWith('{')) receipts.add(String(JSON.parse(text).receipt));
      else expect(text).toMatch(/payment_in_progress/);
    }
    expect(receipts.size).toBe(1);
    expect(await scalar('SELECT COUNT(*) FROM mock_rail_charges')).toBe(1);
    expect(await scalar("SELECT COUNT(*) FROM payments WHERE state = 'succeeded' AND receipt IS NOT NULL")).toBe(1);

    // A second approval of the paid order is refused on either instance, whichever member asks.
    for (const household of [a, b]) {
      for (const role of ['child', 'parent'] as const) {
        const started = await household.runtime.identity.passkeys.approval.options({
          session: a.members[role].session,
          approvalId,
        });
        expect(started.ok, `${role} on ${household === a ? 'A' : 'B'}`).toBe(false);
      }
    }
  });

  it("B, started while A was alive and held the checkpoint lease, reports none of A's rows as unvouched", async () => {
    // B's close waits for its judgement of A's lease, if it has not judged it yet: A renewed it.
    await b.close();
    bClosed = true;
    expect(await scalar("SELECT COUNT(*) FROM audit_log WHERE kind = 'audit-tail-unvouched'")).toBe(0);
  });
});
