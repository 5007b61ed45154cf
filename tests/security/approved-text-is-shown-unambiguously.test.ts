import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { SignJWT } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ChargeRequest } from '../../lib/payments/rail';
import { celAmbiguousTextPattern, regoAmbiguousTextPattern } from '../../policies/family-spend/fixtures/ambiguous-text';
import { loadOrCreateMerchantKey } from '../../shop-agent/index';
import { countingMockRail, startTestHousehold, type TestHousehold } from '../payments/household';
import { textOf } from '../proxy/helpers';
import { callTool, REPO_ROOT, SHOP_ARGS, SHOP_COMMAND, shopEnv } from '../shop-agent/support';

// Issue 26 item 3: the shop signed C0 controls and a right-to-left override in `deliverTo`, and the
// parent's window showed "tS niaM 21" for the signed "\u202e12 Main St". Text a person approves
// must be shown unambiguously: the shop refuses such terms (a real shop process asked over MCP),
// the household's policy refuses them whatever a merchant signs (a trusted merchant's key signs
// one, both members approve it with their passkeys, the charge is refused on both engines and
// nothing reaches the rail). The window's rendering is checked in Chromium by
// tests/e2e/approved-text-is-shown-unambiguously.spec.ts.

/** Addresses a person would misread, each with the character that does it. */
const hostileAddresses: readonly (readonly [string, string, string])[] = [
  ['a right-to-left override', '\u202e12 Main St', 'U+202E'],
  ['a C0 control (ESC)', '12 Main St\u001b[8m', 'U+001B'],
  ['a NUL', '12 Main St\u0000 (rear)', 'U+0000'],
  ['a carriage return', '99 Other Rd\r12 Main St', 'U+000D'],
  ['a right-to-left isolate', '12 \u2067Main St', 'U+2067'],
  ['a zero-width joiner', '12 Main\u200d St', 'U+200D'],
  ['an invisible tag character', '12 Main St\u{E0031}', 'U+E0031'],
  ['a line separator', '12 Main St\u2028Apt 4', 'U+2028'],
  ['a paragraph separator', '12 Main St\u2029Apt 4', 'U+2029'],
];

describe('the shop refuses to sign text that reads otherwise (a real shop process over MCP)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'shop-ambiguous-'));
  let client: Client;
  beforeAll(async () => {
    client = new Client({ name: 'ambiguous-text-test', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: SHOP_COMMAND,
        args: SHOP_ARGS,
        cwd: REPO_ROOT,
        env: shopEnv({ SHOP_AGENT_DATA: dataDir }),
        stderr: 'ignore',
      }),
    );
  });
  afterAll(async () => {
    await client.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it.each(hostileAddresses)('refuses an address with %s and signs nothing', async (_name, deliverTo, named) => {
    const result = await callTool(client, 'request_invoice', { items: [{ sku: 'cheese-slice', qty: 1 }], deliverTo });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({
      violations: [{ code: 'ambiguous_text', message: expect.stringContaining(named) }],
    });
    expect(JSON.stringify(result)).not.toMatch(/eyJ[\w-]+\.eyJ/);
  });

  it('still signs a plain address in any script', async () => {
    const result = await callTool(client, 'request_invoice', {
      items: [{ sku: 'cheese-slice', qty: 1 }],
      deliverTo: 'רחוב הרצל 12, תל אביב',
    });
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    expect(String((result.structuredContent as { invoice?: unknown })?.invoice)).toMatch(/^eyJ/);
  });
});

describe.each(['rego', 'cel'] as const)(
  'the household refuses to pay such terms, whatever a merchant signs (%s)',
  (engine) => {
    let household: TestHousehold;
    let charges: ChargeRequest[];
    beforeAll(async () => {
      const counting = countingMockRail();
      charges = counting.charges;
      household = await startTestHousehold({ engine, rail: counting.rail });
    }, 120_000);
    afterAll(async () => {
      await household.close();
    });
    afterEach(() => {
      expect(charges).toHaveLength(0);
    });

    /**
     * An invoice signed with the trusted merchant's own key (read from the shop's data folder: a
     * merchant whose software does not refuse, or that means harm), carrying `deliverTo`.
     */
    async function merchantSigned(
      deliverTo: string,
      totalCents = 400,
    ): Promise<{ invoice: string; invoiceId: string }> {
      const key = await loadOrCreateMerchantKey(join(household.dataDir, 'shop'));
      expect(key.did).toBe(household.runtime.merchant?.did);
      const invoiceId = `urn:uuid:${randomUUID()}`;
      const now = Math.floor(Date.now() / 1000);
      const invoice = await new SignJWT({
        vc: {
          '@context': ['https://www.w3.org/2018/credentials/v1'],
          type: ['VerifiableCredential', 'Invoice'],
          credentialSubject: {
            merchantId: key.did,
            merchantName: 'Main Street Pizza',
            items: [
              {
                sku: 'cheese-slice',
                name: 'Cheese slice',
                qty: 1,
                unitPriceCents: totalCents,
                listPriceCents: totalCents,
              },
            ],
            totalCents,
            currency: 'usd',
            deliverTo,
          },
        },
      })
        .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid: key.kid })
        .setIssuer(key.did)
        .setJti(invoiceId)
        .setIssuedAt(now)
        .setNotBefore(now)
        .setExpirationTime(now + 300)
        .sign(key.privateKey);
      return { invoice, invoiceId };
    }

    async function approvedAndCharged(deliverTo: string) {
      const { invoice, invoiceId } = await merchantSigned(deliverTo);
      const approvalId = await household.approve(invoice);
      const { json } = await household.call('await_approval', { approvalId }, 'await approval');
      expect(json?.status).toBe('approved');
      return household.call(
        'payments__charge_invoice',
        {
          invoiceId,
          amountCents: 400,
          merchantId: household.runtime.merchant?.did,
          ...(json?.evidence as Record<string, string>),
        },
        'pay charge invoice',
      );
    }

    it.each(hostileAddresses)(
      'a merchant-signed, fully approved invoice with %s is refused',
      async (_name, deliverTo) => {
        const { result } = await approvedAndCharged(deliverTo);
        expect(result.isError).toBe(true);
        expect(textOf(result)).toContain(
          'contains an invisible or control character, such as a right-to-left override',
        );
      },
    );

    it('the same invoice with the plain address is paid (the refusal is the text alone)', async () => {
      const counted = charges.length;
      const { result } = await approvedAndCharged('12 Main St');
      expect(result.isError, textOf(result)).toBeFalsy();
      expect(charges).toHaveLength(counted + 1);
      charges.splice(counted);
    });
  },
);

describe('both engines refuse the same characters', () => {
  it('the patterns in policy.rego and checks.cel.json are the generated ones', () => {
    const rego = readFileSync(new URL('../../policies/family-spend/policy.rego', import.meta.url), 'utf8');
    const cel = readFileSync(new URL('../../policies/family-spend/checks.cel.json', import.meta.url), 'utf8');
    expect(rego).toContain(`ambiguous_text_pattern := \`${regoAmbiguousTextPattern()}\``);
    expect(JSON.parse(cel).bindings).toContainEqual({
      name: 'ambiguous_text_pattern',
      expr: `r'${celAmbiguousTextPattern()}'`,
    });
  });

  it('the generated ranges are exactly Unicode Cc, Cf, Zl and Zp (this runtime: Unicode 17.0)', () => {
    const runtime = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;
    const cel = new RegExp(celAmbiguousTextPattern());
    for (let codePoint = 0; codePoint <= 0x10ffff; codePoint++) {
      if (codePoint >= 0xd800 && codePoint <= 0xdfff) continue;
      const character = String.fromCodePoint(codePoint);
      if (runtime.test(character) !== cel.test(character)) {
        throw new Error(
          `U+${codePoint.toString(16).toUpperCase()} is ${runtime.test(character) ? 'not ' : ''}refused by the CEL pattern`,
        );
      }
    }
  });
});
