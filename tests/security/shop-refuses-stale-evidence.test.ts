import type { Client } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { createSettlementFixture, type SettlementFixture } from '../../shop-agent/testing/settlement-fixture.js';
import { callTool, connectHttpFrom, type InProcessShop, okContent, startInProcessShop } from '../shop-agent/support.js';

// Issue 11 item 12: the shop shipped against an invoice past its `exp`, a receipt with no `exp`
// and a receipt whose `iat` was years in the future. SPEC §5.2: `exp` required, `iat`/`nbf` not
// in the future beyond 60 s, lifetime at most the type's (invoice 5 min, PaymentReceipt 24 h).
// Driven from outside: a real SDK client over Streamable HTTP against the shop's own server.

const DAY = 86_400;
const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** The shop's clock: the real clock plus an offset the test moves (no sleeps). */
function movableClock() {
  let offsetMs = 0;
  return { now: () => new Date(Date.now() + offsetMs), advance: (seconds: number) => (offsetMs += seconds * 1000) };
}

async function shopWithClient(settlement: SettlementFixture, now?: () => Date): Promise<Client> {
  const shop: InProcessShop = await startInProcessShop({
    settlementDid: settlement.did,
    ...(now === undefined ? {} : { now }),
  });
  cleanup.push(() => shop.server.close());
  const client = await connectHttpFrom(`${shop.server.url}/mcp`);
  cleanup.push(() => client.close());
  return client;
}

async function invoiceFor(client: Client): Promise<string> {
  const issued = okContent(
    await callTool(client, 'request_invoice', { items: [{ sku: 'small-cheese', qty: 1 }], deliverTo: '1 Elm St' }),
  ) as { invoice: string };
  return issued.invoice;
}

function refusalText(result: Awaited<ReturnType<typeof callTool>>): string {
  expect(result.isError).toBe(true);
  return JSON.stringify(result.content);
}

describe('the shop refuses stale or open-ended evidence (issue 11 item 12)', () => {
  it('does not ship against an invoice past its exp, even with a fresh valid receipt', async () => {
    const settlement = await createSettlementFixture();
    const clock = movableClock();
    const client = await shopWithClient(settlement, clock.now);
    const invoice = await invoiceFor(client);
    // Six minutes later (the invoice lives five), the household presents a valid, fresh receipt.
    clock.advance(360);
    const receipt = await settlement.signReceipt(settlement.subjectFor(invoice), {
      nowSeconds: Math.floor(clock.now().getTime() / 1000),
    });
    const refused = await callTool(client, 'fulfill', { receipt });
    expect(refusalText(refused)).toMatch(/invoice.*expired/i);
    expect(JSON.stringify(refused)).not.toContain('commitment');
  });

  it('ships a paid order whose invoice expired after the payment, and gives the same commitment again', async () => {
    const settlement = await createSettlementFixture();
    const clock = movableClock();
    const client = await shopWithClient(settlement, clock.now);
    const invoice = await invoiceFor(client);
    // Paid four minutes in (inside the five-minute offer); the fulfilment comes two minutes later,
    // as when the instance that paid died and another took the turn over (SPEC §10.10).
    clock.advance(240);
    const receipt = await settlement.signReceipt(settlement.subjectFor(invoice), {
      nowSeconds: Math.floor(clock.now().getTime() / 1000),
    });
    clock.advance(120);
    const shipped = okContent(await callTool(client, 'fulfill', { receipt })) as { commitment: string };
    expect(shipped.commitment.split('.')).toHaveLength(3);
    const again = okContent(await callTool(client, 'fulfill', { receipt })) as { commitment: string };
    expect(again.commitment).toBe(shipped.commitment);
    // Another payment of the same order (a receipt the settlement never issued for it) ships nothing.
    const other = await settlement.signReceipt(settlement.subjectFor(invoice, { paymentRef: 'pay_other' }), {
      nowSeconds: Math.floor(clock.now().getTime() / 1000) - 120,
    });
    expect(refusalText(await callTool(client, 'fulfill', { receipt: other }))).toMatch(/already fulfilled/);
  });

  it.each([
    ['no exp', { omitExp: true }, /exp/],
    ['no iat', { omitIat: true }, /iat/],
    ['no nbf', { omitNbf: true }, /nbf/],
    ['iat three years in the future', { iatOffsetSeconds: 3 * 365 * DAY }, /iat.*future/],
    ['iat two minutes in the future', { iatOffsetSeconds: 120 }, /iat.*future/],
    ['nbf three years in the future', { nbfOffsetSeconds: 3 * 365 * DAY }, /not valid yet|nbf/],
    ['a lifetime of ten years', { ttlSeconds: 10 * 365 * DAY }, /lifetime/],
    ['a lifetime one second over 24 h', { ttlSeconds: DAY + 1 }, /lifetime/],
    ['expired', { nowSeconds: Math.floor(Date.now() / 1000) - 7200, ttlSeconds: 3600 }, /expired/],
  ])('refuses a receipt with %s, and the order still ships with an honest one', async (_name, variant, reason) => {
    const settlement = await createSettlementFixture();
    const client = await shopWithClient(settlement);
    const invoice = await invoiceFor(client);
    const bad = await settlement.signReceipt(settlement.subjectFor(invoice), variant);
    expect(refusalText(await callTool(client, 'fulfill', { receipt: bad }))).toMatch(reason);

    // The refusal spent nothing: the same order ships against a bounded receipt (within 60 s skew).
    const honest = await settlement.signReceipt(settlement.subjectFor(invoice), {
      iatOffsetSeconds: 30,
      ttlSeconds: DAY,
    });
    const shipped = okContent(await callTool(client, 'fulfill', { receipt: honest })) as { commitment: string };
    expect(shipped.commitment.split('.')).toHaveLength(3);
  });
});
