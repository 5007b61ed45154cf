import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { IdentityStore, PasskeyRecord } from '../../identity/index';
import { familySpendLookups } from '../../lib/payments/family-spend-lookups';
import {
  evidenceNow,
  type FamilySpendCase,
  familySpendCheckIds,
  familySpendTable,
  loadEvidence,
} from '../../policies/family-spend/fixtures/family-spend-fixtures';
import type { CallContext, CallRequest } from '../../proxy/index';
import {
  createHostBuiltins,
  loadBundle,
  loadCelEngine,
  loadRegoEngine,
  type PolicyDecisionRecord,
  type PolicyEngine,
  policyFilter,
  renderDenial,
} from '../../proxy/policy/index';

const directory = new URL('../../policies/family-spend', import.meta.url).pathname;
const file = (name: string) => readFileSync(new URL(`../../policies/family-spend/${name}`, import.meta.url));
const evidence = loadEvidence();
const builtins = createHostBuiltins({ webauthn: { rpId: evidence.webauthn.rpId } });
const committed = JSON.parse(file('cases.json').toString('utf8')) as ReturnType<typeof familySpendTable>;
const cases = committed.family_spend_cases;
const byName = (name: string): FamilySpendCase => {
  const found = cases.find((entry) => entry.name === name);
  if (!found) throw new Error(`no case ${name}`);
  return found;
};

const engines: Record<'rego' | 'cel', () => Promise<PolicyEngine>> = {
  rego: () => loadRegoEngine({ wasm: file('policy.wasm'), builtins }),
  cel: async () => loadCelEngine({ checks: JSON.parse(file('checks.cel.json').toString('utf8')), builtins }),
};

describe('the family-spend case table', () => {
  it('is what the generator makes from identity/fixtures/evidence.json', () => {
    expect(committed).toEqual(familySpendTable());
  });

  it('covers every case the issue names, at the evidence generatedAt', () => {
    const names = cases.map((entry) => entry.name);
    for (const name of [
      'the $4 order, the child alone',
      'the $15 order, the child and the parent',
      'the other $15 order, the child and the parent',
      'amount tampered',
      'merchant tampered',
      'invoiceId tampered',
      'invoice expired',
      'invoice from an untrusted merchant',
      'child approval for another invoice',
      'parent approval for another invoice',
      "the child's passkey on the parent leg",
      'membership signed by an untrusted admin',
      'assertion without UV',
      'assertion from the wrong origin',
      '$15 with only the child',
      '$300: amount tampered to 30000 with the $15 evidence',
      '$300: amount tampered to 30000 with the $4 evidence',
    ]) {
      expect(names).toContain(name);
    }
    expect(byName('the $4 order, the child alone').input.now).toBe(evidenceNow(evidence));
  });

  it('names only check ids the bundle has, and every check id in both engines and the guidance', () => {
    const cel = JSON.parse(file('checks.cel.json').toString('utf8')) as { checks: Record<string, string> };
    const guidance = JSON.parse(file('guidance.json').toString('utf8')) as { checks: Record<string, unknown> };
    const rego = file('policy.rego').toString('utf8');
    expect(Object.keys(cel.checks).sort()).toEqual([...familySpendCheckIds].sort());
    expect(Object.keys(guidance.checks).sort()).toEqual([...familySpendCheckIds].sort());
    for (const id of familySpendCheckIds) expect(rego).toContain(`"${id}": ${id},`);
    for (const entry of cases) {
      if (entry.expect.decision === 'deny')
        for (const id of entry.expect.mustFail) expect(familySpendCheckIds).toContain(id);
    }
  });
});

describe.each(Object.entries(engines))('family-spend on %s', (_kind, load) => {
  it.each(cases.map((entry) => [entry.name, entry] as const))('decides "%s" as expected', async (_name, entry) => {
    const outcome = await (await load()).evaluate(entry.input);
    expect(outcome.decision).toBe(entry.expect.decision);
    if (outcome.decision === 'deny' && entry.expect.decision === 'deny') {
      expect(outcome.failedChecks).toEqual(expect.arrayContaining([...entry.expect.mustFail]));
    }
  });

  it('fails exactly the solo limit on the fully approved $15 order (every leg verified)', async () => {
    const outcome = await (await load()).evaluate(byName('the $15 order, the child and the parent').input);
    expect(outcome.decision).toBe('allow');
  });

  it('asks only for the parent when the child alone approved $15', async () => {
    const outcome = await (await load()).evaluate(byName('$15 with only the child').input);
    expect(outcome).toMatchObject({ decision: 'deny', failedChecks: ['parent_present', 'within_child_limit'] });
  });

  it('refuses a fully approved $300 order on the household limit alone', async () => {
    const outcome = await (await load()).evaluate(byName('synthetic: a fully approved $300 order').input);
    expect(outcome).toMatchObject({ decision: 'deny', failedChecks: ['within_child_limit', 'within_household_limit'] });
  });

  it.each([
    ['null input', null],
    ['empty object', {}],
    ['arguments only', { arguments: { invoiceId: 'x', amountCents: 400, merchantId: 'y' } }],
  ])('never allows on %s', async (_label, input) => {
    expect((await (await load()).evaluate(input)).decision).not.toBe('allow');
  });
});

describe.each(['rego', 'cel'] as const)('family-spend guidance (%s)', (engine) => {
  const render = async (name: string) => {
    const bundle = await loadBundle({ directory, builtins, engine });
    const input = byName(name).input as unknown as Record<string, unknown>;
    const outcome = await bundle.engine.evaluate(input);
    if (outcome.decision !== 'deny') throw new Error(`${name}: ${outcome.decision}`);
    return renderDenial(bundle.guidance, outcome.failedChecks, input);
  };

  it('names the parent, and why, when the child alone approved $15', async () => {
    const text = await render('$15 with only the child');
    expect(text).toContain(
      'the parent must approve because $15.00 is over $10.00 — ask them to open the parent window',
    );
    expect(text).toContain('Path 1 (the child alone, up to $10.00): keep the order at or under $10.00.');
    for (const id of familySpendCheckIds) expect(text).not.toContain(id);
  });

  it.each(cases.filter((entry) => entry.expect.decision === 'deny').map((entry) => [entry.name] as const))(
    'renders "%s" in plain words, without a raw check id',
    async (name) => {
      const text = await render(name);
      expect(text).toMatch(/^Refused by the family spending policy\./);
      for (const id of familySpendCheckIds) expect(text).not.toContain(id);
    },
  );
});

describe('Rego and CEL decide the whole table identically', () => {
  it('same decision and same failed checks on every case', async () => {
    const [rego, cel] = [await engines.rego(), await engines.cel()];
    for (const entry of cases) {
      const [a, b] = [await rego.evaluate(entry.input), await cel.evaluate(entry.input)];
      expect({ name: entry.name, decision: a.decision, failed: a.decision === 'deny' ? a.failedChecks : [] }).toEqual({
        name: entry.name,
        decision: b.decision,
        failed: b.decision === 'deny' ? b.failedChecks : [],
      });
    }
  });
});

/** The household and identity store the lookups read, as identity's evidence describes them. */
function evidenceStore(options: { readonly merchants: boolean }): {
  household: Parameters<typeof familySpendLookups>[0]['household'];
  store: Pick<IdentityStore, 'passkeys' | 'merchants'>;
} {
  const enrollmentOf = (role: 'child' | 'parent') => evidence.enrollments[role].enrollment;
  const credentialIds = {
    child: (evidence as unknown as { enrollments: { child: { credentialId: string } } }).enrollments.child.credentialId,
    parent: (evidence as unknown as { enrollments: { parent: { credentialId: string } } }).enrollments.parent
      .credentialId,
  };
  const passkeys = new Map<string, PasskeyRecord>(
    (['child', 'parent'] as const).map((role) => [
      credentialIds[role],
      {
        credentialId: credentialIds[role],
        role,
        memberDid: evidence.household.members[role],
        userHandle: role,
        publicKeyCose: '',
        publicKeyJwk: {},
        counter: 0,
        transports: [],
        enrollment: enrollmentOf(role),
        createdAt: 0,
      },
    ]),
  );
  const merchant = {
    did: evidence.merchant.did,
    name: 'Pizza Shop',
    publicKeyJwk: evidence.merchant.publicKeyJwk,
    trustedAt: 0,
  };
  return {
    household: { members: evidence.household.members, memberships: evidence.household.memberships },
    store: {
      passkeys: {
        add: async () => false,
        get: async (credentialId) => passkeys.get(credentialId),
        listByRole: async () => [],
        updateCounter: async () => false,
      },
      merchants: {
        add: async () => false,
        get: async (did) => (options.merchants && did === merchant.did ? merchant : undefined),
        list: async () => (options.merchants ? [merchant] : []),
        remove: async () => false,
      },
    },
  };
}

describe.each(['rego', 'cel'] as const)('the gateway policy filter over family-spend (%s)', (engine) => {
  const context: CallContext = {
    principal: { id: 'test' },
    scope: { kind: 'session' as const, id: 'family-spend-test' },
  };
  const [four, fifteen, another] = evidence.orders;
  const config = {
    household: {
      adminDid: evidence.household.adminDid,
      adminJwk: evidence.household.adminDocument.verificationMethod[0]?.publicKeyJwk,
    },
    webauthn: evidence.webauthn,
  };
  const call = (args: Record<string, unknown>): CallRequest => ({
    tool: 'payments__charge_invoice',
    toolName: 'charge_invoice',
    server: { name: 'payments', admission: 'in-process' },
    arguments: args,
    hasOutputSchema: false,
    credentialFields: ['invoice', 'childApproval', 'parentApproval'],
  });
  const charge = (order: (typeof evidence.orders)[number], extra: Record<string, unknown> = {}) => ({
    invoiceId: order.invoiceId,
    amountCents: order.totalCents,
    merchantId: evidence.merchant.did,
    invoice: order.invoice,
    childApproval: order.childApproval,
    ...(order.parentApproval === undefined ? {} : { parentApproval: order.parentApproval }),
    ...extra,
  });
  const filterFor = async (options: { merchants: boolean }, records: PolicyDecisionRecord[] = []) => {
    const { household, store } = evidenceStore(options);
    return policyFilter({
      bundle: await loadBundle({ directory, builtins, engine }),
      config,
      resolvers: familySpendLookups({ household, store }),
      now: () => evidenceNow(evidence) * 1000,
      onDecision: (record) => records.push(record),
    });
  };

  it('allows the $15 order approved by both, and the downstream sees no credential', async () => {
    const verdict = await (await filterFor({ merchants: true }))(call(charge(fifteen)), context);
    expect(verdict).toEqual({
      decision: 'allow',
      request: expect.objectContaining({
        arguments: { invoiceId: fifteen.invoiceId, amountCents: 1500, merchantId: evidence.merchant.did },
      }),
    });
  });

  // Regression: a conditional lookup (guard always:false) whose `$input` names an absent field
  // (`parentEvidence` from a missing `parentApproval`) once stopped assembly as missing.
  it('allows the $4 order the child approved alone (the parent lookup is conditional)', async () => {
    const verdict = await (await filterFor({ merchants: true }))(call(charge(four)), context);
    expect(verdict.decision).toBe('allow');
  });

  it('tells the model the parent must approve $15 the child approved alone, naming no check id', async () => {
    const { parentApproval: _omitted, ...childOnly } = charge(fifteen);
    const verdict = await (await filterFor({ merchants: true }))(call(childOnly), context);
    expect(verdict.decision).toBe('deny');
    const reason = verdict.decision === 'deny' ? verdict.reason : '';
    expect(reason).toContain(
      'the parent must approve because $15.00 is over $10.00 — ask them to open the parent window',
    );
    for (const id of familySpendCheckIds) expect(reason).not.toContain(id);
  });

  it('refuses $300 naming the household limit', async () => {
    const verdict = await (await filterFor({ merchants: true }))(
      call(charge(fifteen, { amountCents: 30000 })),
      context,
    );
    expect(verdict.decision).toBe('deny');
    expect(verdict.decision === 'deny' ? verdict.reason : '').toContain(
      "$300.00 is over the household's $200.00 limit",
    );
  });

  it('refuses an invoice from a merchant the operator did not pin (the model cannot add one)', async () => {
    const records: PolicyDecisionRecord[] = [];
    const verdict = await (await filterFor({ merchants: false }, records))(call(charge(fifteen)), context);
    expect(verdict.decision).toBe('deny');
    expect(records.at(-1)?.failedChecks).toContain('invoice_signature');
  });

  it('refuses a swapped child approval', async () => {
    const records: PolicyDecisionRecord[] = [];
    const filter = await filterFor({ merchants: true }, records);
    const verdict = await filter(call(charge(fifteen, { childApproval: another.childApproval })), context);
    expect(verdict.decision).toBe('deny');
    expect(records.at(-1)?.failedChecks).toContain('child_approval_invoice');
  });

  it('denies, naming the field, an approval whose signer is no household member (the lookup finds nothing)', async () => {
    const records: PolicyDecisionRecord[] = [];
    const stranger = `${fifteen.childApproval.split('.')[0]}.${Buffer.from(
      JSON.stringify({ iss: 'did:key:z6MkStranger', vc: { credentialSubject: { passkey: { credentialId: 'x' } } } }),
    ).toString('base64url')}.AAAA`;
    const verdict = await (await filterFor({ merchants: true }, records))(
      call(charge(fifteen, { childApproval: stranger })),
      context,
    );
    expect(verdict.decision).toBe('deny');
    expect(records.at(-1)?.detail).toBe('missing childEvidence');
  });

  it('refuses an unbound extra argument after the policy allowed (closed manifest)', async () => {
    const verdict = await (await filterFor({ merchants: true }))(call(charge(fifteen, { tip: 500 })), context);
    expect(verdict.decision).toBe('deny');
    expect(verdict.decision === 'deny' ? verdict.reason : '').toContain('unexpected `tip`');
  });
});
