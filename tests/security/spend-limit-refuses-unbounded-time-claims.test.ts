import { afterEach, describe, expect, it } from 'vitest';
import {
  FIXTURE_NOW,
  FIXTURE_PAYEE,
  fixtureParty,
  type SpendCredentialOptions,
  spendCredential,
  spendLimitTrust,
} from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import { createHostBuiltins, loadBundle } from '../../proxy/index';
import { governedBank } from '../policy/governed-bank';
import { callTool, textOf } from '../proxy/helpers';

// Issue 11 item 12, policy side: the spend-limit bundle read `nbf` and `exp` but never `iat` nor a
// lifetime, so a signed request "issued" years in the future, or valid for ten years, paid.
// SPEC §5.2: exp required, iat/nbf not in the future beyond 60 s, a maximum lifetime (15 min
// here). Driven from outside: a real SDK client through the gateway to a recording downstream,
// on both engines (the Rego WASM and its CEL twin).

const YEAR = 365 * 86_400;
const requester = fixtureParty('requester');
const trust = spendLimitTrust(requester, fixtureParty('approver'));
const directory = new URL('../../policies/spend-limit', import.meta.url).pathname;

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

describe.each(['rego', 'cel'] as const)('spend-limit bounds every time claim (%s)', (engine) => {
  async function setup() {
    const bank = await governedBank({ engine });
    cleanup.push(() => bank.close());
    return { client: bank.client, received: bank.received };
  }

  const request = (jti: string, extra: Partial<SpendCredentialOptions>) =>
    spendCredential({ issuer: requester, type: 'SpendRequest', amountCents: 500, jti: `urn:uuid:${jti}`, ...extra });

  // Each stays within the gateway's own single-use horizon (24 h), so the bundle is what decides.
  it.each([
    ['issued an hour in the future', { iat: FIXTURE_NOW + 3600, nbf: FIXTURE_NOW - 60 }],
    ['issued two minutes in the future', { iat: FIXTURE_NOW + 120, nbf: FIXTURE_NOW - 60 }],
    ['valid for twelve hours', { exp: FIXTURE_NOW + 12 * 3600 }],
    ['valid for one second over 15 minutes', { exp: FIXTURE_NOW - 60 + 901 }],
    ['undated (no iat)', { omit: ['iat'] as const }],
  ])('refuses a spend request %s; nothing reaches the bank', async (name, times) => {
    const { client, received } = await setup();
    const credential = request(`${engine}-${name.replaceAll(' ', '-')}`, times);
    const refused = await callTool(client, 'bank__pay', {
      amountCents: 500,
      payee: FIXTURE_PAYEE,
      requesterCredential: credential,
    });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/expired, not yet valid, undated, or valid for longer than 15 minutes/);
    expect(textOf(refused)).not.toContain(credential);
    expect(received).toEqual([]);

    // A bounded request for the same spend still pays: the refusal was about time, nothing else.
    const honest = request(`${engine}-${name.replaceAll(' ', '-')}-honest`, {});
    expect(
      textOf(
        await callTool(client, 'bank__pay', { amountCents: 500, payee: FIXTURE_PAYEE, requesterCredential: honest }),
      ),
    ).toBe('paid');
    expect(received).toEqual([{ amountCents: 500, payee: FIXTURE_PAYEE }]);
  });

  it.each([
    ['open-ended (no exp)', { omit: ['exp'] as const }],
    ['issued three years in the future', { iat: FIXTURE_NOW + 3 * YEAR, nbf: FIXTURE_NOW - 60 }],
    ['valid for ten years', { exp: FIXTURE_NOW + 10 * YEAR }],
  ])('the bundle itself denies a spend request %s (requester_window)', async (name, times) => {
    const bundle = await loadBundle({ directory, builtins: createHostBuiltins(), engine });
    const outcome = await bundle.engine.evaluate({
      tool: 'pay',
      arguments: { amountCents: 500, payee: FIXTURE_PAYEE },
      requesterCredential: request(`${engine}-${name.replaceAll(' ', '-')}`, times),
      trust,
      now: FIXTURE_NOW,
    });
    expect(outcome).toMatchObject({ decision: 'deny', failedChecks: expect.arrayContaining(['requester_window']) });
    // Only time is wrong: the signature, issuer and binding all hold.
    expect(JSON.stringify(outcome)).not.toMatch(/requester_(signature|issuer|bound)/);
  });
});
