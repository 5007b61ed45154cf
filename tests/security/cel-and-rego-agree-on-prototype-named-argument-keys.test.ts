import { afterEach, describe, expect, it } from 'vitest';
import { FIXTURE_PAYEE, spendCredential } from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import { type GovernedBank, governedBank, requester } from '../policy/governed-bank';
import { callTool, textOf } from '../proxy/helpers';

// Issue 11 item 14: arguments with keys named like Object.prototype members (`constructor`,
// `__proto__`, `toString`) made the CEL twin of the spend-limit bundle fault ("Unsupported
// type") while Rego decided normally. Both engines must see the same input shape and so reach
// the same outcome, end to end through the governed gateway.
const opened: GovernedBank[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((bank) => bank.close()));
});

async function governedGateway(engine: 'rego' | 'cel') {
  const bank = await governedBank({ engine });
  opened.push(bank);
  return { client: bank.client, received: bank.received };
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
