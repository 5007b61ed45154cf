import { afterEach, describe, expect, it } from 'vitest';
import { FIXTURE_PAYEE, spendCredential } from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import { callTool, textOf } from '../proxy/helpers';
import { type GovernedBank, governedBank, requester } from './governed-bank';

// End to end through the real proxy: a governed in-process "bank" server behind the router,
// single-use evidence and the spend-limit bundle. Asserts on what the downstream really received.
const opened: GovernedBank[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((bank) => bank.close()));
});

describe.each(['rego', 'cel'] as const)('a governed downstream behind the proxy (%s)', (engine) => {
  // The router reads the admission facts the gateway stamps: nothing is fed back by the host.
  async function setup() {
    const bank = await governedBank({ engine });
    opened.push(bank);
    return { client: bank.client, received: bank.received, found: textOf(bank.found) };
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
