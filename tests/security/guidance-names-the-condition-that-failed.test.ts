import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  type FamilySpendCase,
  familySpendCheckIds,
  familySpendTable,
  flipCharacter,
} from '../../policies/family-spend/fixtures/family-spend-fixtures';
import { createHostBuiltins, type Guidance, loadBundle, parseGuidance, renderDenial } from '../../proxy/policy/index';

// Issue 26 item 11: the household policy's guidance said "$4.00 is over $10.00" — the parent's
// remedy claimed a limit was exceeded whenever the parent had not approved, whichever check had
// really failed. Every guidance sentence must be generated from the condition that actually
// failed. This walks every reason family-spend can give, on both engines, over every denied case
// of the shared table: each sentence said is the sentence of a check that failed (and not a mere
// consequence of an earlier failure, such as "expired" about an invoice whose signature did not
// verify); every amount comparison said is arithmetically true of the call; and every reason is
// said by at least one case.

const directory = new URL('../../policies/family-spend', import.meta.url).pathname;
const builtins = createHostBuiltins({ webauthn: { rpId: 'localhost' } });
const cases = familySpendTable().family_spend_cases;
const byName = (name: string): FamilySpendCase => {
  const found = cases.find((entry) => entry.name === name);
  if (found === undefined) throw new Error(`no case ${name}`);
  return found;
};

/** `$15.00` → 1500, `-$0.50` → -50, `1000.4 cents` → 1000.4. */
function centsOf(said: string): number {
  const cents = /^(-?[\d.]+) cents$/.exec(said);
  if (cents) return Number(cents[1]);
  const dollars = /^(-?)\$(\d+)\.(\d\d)$/.exec(said);
  if (!dollars) throw new Error(`not an amount: ${said}`);
  return (dollars[1] === '-' ? -1 : 1) * (Number(dollars[2]) * 100 + Number(dollars[3]));
}
const amount = String.raw`(-?\$\d+\.\d\d|-?[\d.]+ cents)`;

/** The verified invoice's claims (the engines said its signature held, so they are its own). */
function invoiceClaims(input: FamilySpendCase['input']): Record<string, unknown> {
  return JSON.parse(Buffer.from(input.invoice.split('.')[1] ?? '', 'base64url').toString('utf8'));
}

/** Checks every amount comparison in `text` against the call it was said of. */
function expectAmountsTrue(text: string, input: FamilySpendCase['input']): void {
  const charged = input.arguments.amountCents;
  for (const match of text.matchAll(new RegExp(`${amount} is over (?:the (?:household's )?)?${amount}`, 'g'))) {
    const [said, over, limit] = match;
    expect(centsOf(over ?? ''), `${said} (charged ${charged})`).toBe(charged);
    expect(centsOf(over ?? ''), said).toBeGreaterThan(centsOf(limit ?? ''));
  }
  for (const match of text.matchAll(new RegExp(`${amount} is not the total of the signed invoice \\(in usd\\)`, 'g'))) {
    const subject = (invoiceClaims(input).vc as { credentialSubject?: Record<string, unknown> } | undefined)
      ?.credentialSubject;
    expect(centsOf(match[1] ?? ''), match[0]).toBe(charged);
    expect(subject?.totalCents === charged && subject.currency === 'usd', match[0]).toBe(false);
  }
}

/** The sentences the guidance may say for a set of failed checks: its own, never a consequence's. */
function saidChecks(guidance: Guidance, failed: readonly string[]): string[] {
  return failed.filter((id) => !(guidance.checks[id]?.after ?? []).some((other) => failed.includes(other)));
}

describe.each(['rego', 'cel'] as const)('family-spend guidance names the condition that failed (%s)', (engine) => {
  const load = () => loadBundle({ directory, builtins, engine });

  async function denial(input: FamilySpendCase['input']) {
    const bundle = await load();
    const outcome = await bundle.engine.evaluate(input as never);
    if (outcome.decision !== 'deny') throw new Error(`expected a denial, got ${outcome.decision}`);
    return {
      failed: outcome.failedChecks,
      text: renderDenial(bundle.guidance, outcome.failedChecks, input as never),
      guidance: bundle.guidance,
    };
  }

  it('walks every denied case: each sentence said is a failed check of its own, each amount true', async () => {
    const saidSomewhere = new Set<string>();
    for (const entry of cases.filter((candidate) => candidate.expect.decision === 'deny')) {
      const { failed, text, guidance } = await denial(entry.input);
      const said = saidChecks(guidance, failed);
      for (const id of said) saidSomewhere.add(id);
      for (const [id, check] of Object.entries(guidance.checks)) {
        // A sentence with no placeholder is recognisable verbatim: said exactly when its check is.
        if (/\{/.test(check.sentence)) continue;
        expect(text.includes(check.sentence), `${entry.name}: ${id}`).toBe(said.includes(id));
      }
      expectAmountsTrue(text, entry.input);
      expect(text, entry.name).not.toContain('every requirement is met');
      for (const id of familySpendCheckIds) expect(text, entry.name).not.toContain(id);
    }
    // Every reason family-spend can give was said by some case.
    expect([...saidSomewhere].sort()).toEqual([...familySpendCheckIds].sort());
  });

  it('never says "$4.00 is over $10.00": a $4 order whose child approval failed, with no parent', async () => {
    const solo = byName('the $4 order, the child alone').input;
    const { failed, text } = await denial({ ...solo, childApproval: flipCharacter(solo.childApproval, 2) });
    expect(failed).toEqual(expect.arrayContaining(['child_approval_signature', 'parent_present']));
    expect(text).not.toMatch(/over \$10\.00/);
    expect(text).toContain('the parent must approve — ask them to open the parent window');
    expect(text).toContain("The child's approval is not signed by a household member's key.");
  });

  it('says why the parent must approve when the amount really is over $10.00', async () => {
    const { text } = await denial(byName('$15 with only the child').input);
    expect(text).toContain(
      'the parent must approve because $15.00 is over $10.00 — ask them to open the parent window',
    );
  });

  it('an untrusted invoice is not also called expired, mis-addressed or of another amount', async () => {
    const { text } = await denial(byName('invoice from an untrusted merchant').input);
    expect(text).toContain('The invoice is not signed by a merchant the household trusts.');
    expect(text).not.toMatch(/expired|is not the id|is not the total|is not the merchant|invisible/);
  });

  it('a missing approval is not also called unsigned, expired or for another invoice', async () => {
    const { failed, text } = await denial(byName('$15 with only the child').input);
    expect(failed).toEqual(['parent_present', 'within_child_limit']);
    expect(text).not.toMatch(/parent's approval is|parent's passkey|parent's household membership/);
  });

  it('never rounds an amount into a false comparison: 1000.4 cents is not "$10.00 is over $10.00"', async () => {
    const { text } = await denial(byName('synthetic: a fully approved invoice for 1000.4 cents').input);
    expect(text).not.toContain('$10.00 is over');
    expect(text).toContain('`amountCents` is not a whole number of cents from 1 to 10000000.');
  });
});

describe('spend-limit guidance names the condition that failed', () => {
  const guidance = parseGuidance(
    JSON.parse(readFileSync(new URL('../../policies/spend-limit/guidance.json', import.meta.url), 'utf8')),
  );

  it.each([
    ['$4.00 with a bad requester credential and no approval', 400, ['requester_signature', 'approver_present']],
    [
      '$4.00 with no approval and every claim check failing after it',
      400,
      [
        'approver_present',
        'approver_signature',
        'approver_issuer',
        'approver_window',
        'approver_bound',
        'requester_signature',
      ],
    ],
  ] as const)('%s: no limit is said to be exceeded, no absent approval is called unsigned', (_name, cents, failed) => {
    const text = renderDenial(guidance, failed, { arguments: { amountCents: cents }, trust: { limitCents: 1000 } });
    expect(text).not.toMatch(/is over/);
    expect(text).not.toContain('The approval is not signed by the trusted approver key.');
    expect(text).toContain('provide `approverCredential`, signed by the approver.');
  });

  it('$15.00 over the $10.00 limit says so, because it is', () => {
    const text = renderDenial(guidance, ['within_limit', 'approver_present'], {
      arguments: { amountCents: 1500 },
      trust: { limitCents: 1000 },
    });
    expect(text).toContain('provide `approverCredential`, signed by the approver, because $15.00 is over $10.00');
  });
});
