import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  type ApprovalContext,
  createCredentialVerifier,
  createVeramoVerifier,
  type DidDocument,
  householdKeys,
  invoiceHashOf,
  type Role,
  verifyAssertionFast,
  verifyAssertionWithSimpleWebAuthn,
  verifyOrderApproval,
} from '../../identity/index';

// The committed evidence set (Veramo credentials, shop-signed invoices, Chromium's virtual
// authenticator): both verifiers must agree on every fixture, and on every swap between them.
interface Fixture {
  generatedAt: string;
  webauthn: { rpId: string; origin: string };
  household: {
    adminDid: string;
    adminDocument: DidDocument;
    members: Record<Role, string>;
    memberships: Record<Role, string>;
  };
  merchant: { did: string; publicKeyJwk: Record<string, string> };
  enrollments: Record<Role, { credentialId: string; publicKeyJwk: Record<string, string>; enrollment: string }>;
  orders: Array<{
    name: string;
    totalCents: number;
    invoice: string;
    invoiceHash: string;
    requiredRoles: Role[];
    childApproval: string;
    parentApproval?: string;
  }>;
  hostile: {
    childApprovalWithoutUserVerification: { order: number; approval: string };
    childApprovalFromAnotherOrigin: { order: number; approval: string };
    parentApprovalWithChildPasskey: { order: number; approval: string };
    foreignAdmin: { adminDid: string; adminDocument: DidDocument; childMembership: string };
  };
}

const fixture = JSON.parse(
  readFileSync(new URL('../../identity/fixtures/evidence.json', import.meta.url), 'utf8'),
) as Fixture;
const now = new Date(fixture.generatedAt);
const adminJwk = fixture.household.adminDocument.verificationMethod[0]?.publicKeyJwk ?? {};
const verifierPairs: Record<string, Pick<ApprovalContext, 'verifyCredential' | 'verifyAssertion'>> = {
  'hot path': {
    verifyCredential: createCredentialVerifier(householdKeys({ adminDid: fixture.household.adminDid, adminJwk })),
    verifyAssertion: verifyAssertionFast,
  },
  'Veramo + SimpleWebAuthn': {
    verifyCredential: createVeramoVerifier({ adminDocument: fixture.household.adminDocument }),
    verifyAssertion: verifyAssertionWithSimpleWebAuthn,
  },
};

function leg(order: Fixture['orders'][number], role: Role, approval = order[`${role}Approval`] ?? '') {
  return {
    invoice: order.invoice,
    approval,
    role,
    membership: fixture.household.memberships[role],
    enrollment: fixture.enrollments[role].enrollment,
  };
}

async function verdicts(evidence: ReturnType<typeof leg>, at = now) {
  const results: Record<string, boolean> = {};
  for (const [name, pair] of Object.entries(verifierPairs)) {
    const verdict = await verifyOrderApproval(evidence, {
      adminDid: fixture.household.adminDid,
      webauthn: fixture.webauthn,
      now: at,
      ...pair,
    });
    results[name] = verdict.verified;
  }
  return results;
}

describe('the committed evidence set', () => {
  it('holds a $4 order approved by the child and two $15 orders approved by both', () => {
    expect(fixture.orders.map((order) => [order.totalCents, order.requiredRoles])).toEqual([
      [400, ['child']],
      [1500, ['child', 'parent']],
      [1500, ['child', 'parent']],
    ]);
    for (const order of fixture.orders) expect(invoiceHashOf(order.invoice)).toBe(order.invoiceHash);
  });

  it('verifies every leg with both verifiers', async () => {
    for (const order of fixture.orders) {
      for (const role of order.requiredRoles) {
        expect(await verdicts(leg(order, role)), `${order.name} ${role}`).toEqual({
          'hot path': true,
          'Veramo + SimpleWebAuthn': true,
        });
      }
    }
  });

  it('verifies every invoice against the merchant key with both verifiers', async () => {
    for (const order of fixture.orders) {
      const merchantKey = (did: string) => (did === fixture.merchant.did ? fixture.merchant.publicKeyJwk : undefined);
      const hot = await createCredentialVerifier(merchantKey)(order.invoice, { type: 'Invoice', now });
      const veramo = await createVeramoVerifier({ adminDocument: fixture.household.adminDocument })(order.invoice, {
        type: 'Invoice',
        issuer: fixture.merchant.did,
        now,
      });
      expect([hot.verified, veramo.verified], order.name).toEqual([true, true]);
    }
  });

  it('both refuse every swap: another invoice, another role, another enrollment, later than the approval lives', async () => {
    const [small, large] = fixture.orders as [Fixture['orders'][number], Fixture['orders'][number]];
    const refused = { 'hot path': false, 'Veramo + SimpleWebAuthn': false };
    const cases: Array<[string, ReturnType<typeof leg>, Date?]> = [
      ['the $4 child approval on the $15 invoice', { ...leg(large, 'child'), approval: small.childApproval }],
      ['the $15 parent approval on the $4 invoice', { ...leg(small, 'parent'), approval: large.parentApproval ?? '' }],
      ["the child's approval as the parent's", { ...leg(large, 'parent'), approval: large.childApproval }],
      ["the parent's approval as the child's", { ...leg(large, 'child'), approval: large.parentApproval ?? '' }],
      [
        "the child's membership on the parent leg",
        { ...leg(large, 'parent'), membership: fixture.household.memberships.child },
      ],
      [
        "the parent's enrollment on the child leg",
        { ...leg(large, 'child'), enrollment: fixture.enrollments.parent.enrollment },
      ],
      ['an approval past its 15 minutes', leg(small, 'child'), new Date(now.getTime() + 16 * 60 * 1000)],
    ];
    for (const [name, evidence, at] of cases) expect(await verdicts(evidence, at), name).toEqual(refused);
  });

  it('both refuse the hostile evidence: no UV, another origin, the child passkey on the parent leg, a foreign admin', async () => {
    const refused = { 'hot path': false, 'Veramo + SimpleWebAuthn': false };
    const { hostile } = fixture;
    const order = (index: number) => fixture.orders[index] as Fixture['orders'][number];
    const cases: Array<[string, ReturnType<typeof leg>]> = [
      ['without user verification', leg(order(0), 'child', hostile.childApprovalWithoutUserVerification.approval)],
      ['from another origin', leg(order(0), 'child', hostile.childApprovalFromAnotherOrigin.approval)],
      ['the child passkey on the parent leg', leg(order(1), 'parent', hostile.parentApprovalWithChildPasskey.approval)],
      [
        "the child's passkey enrollment on the parent leg",
        {
          ...leg(order(1), 'parent', hostile.parentApprovalWithChildPasskey.approval),
          enrollment: fixture.enrollments.child.enrollment,
        },
      ],
      [
        'a membership from another household',
        { ...leg(order(0), 'child'), membership: hostile.foreignAdmin.childMembership },
      ],
    ];
    for (const [name, evidence] of cases) expect(await verdicts(evidence), name).toEqual(refused);
  });

  it('both refuse the passkey assertion on another origin or rpId', async () => {
    const order = fixture.orders[0] as Fixture['orders'][number];
    for (const webauthn of [
      { ...fixture.webauthn, origin: 'http://localhost:3001' },
      { ...fixture.webauthn, rpId: 'example.com' },
    ]) {
      for (const [name, pair] of Object.entries(verifierPairs)) {
        const verdict = await verifyOrderApproval(leg(order, 'child'), {
          adminDid: fixture.household.adminDid,
          webauthn,
          now,
          ...pair,
        });
        expect(verdict.verified, `${name} ${JSON.stringify(webauthn)}`).toBe(false);
      }
    }
  });
});
