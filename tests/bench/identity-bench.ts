import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createCredentialVerifier,
  createVeramoVerifier,
  type DidDocument,
  householdKeys,
  openHousehold,
  type PasskeyAssertion,
  type Role,
  verifyAssertionFast,
  verifyAssertionWithSimpleWebAuthn,
  verifyOrderApproval,
} from '../../identity/index';
import { openSqliteHouseholdStore } from '../../lib/store';
import { measure, measureInterleaved } from './measure';

interface Fixture {
  generatedAt: string;
  webauthn: { rpId: string; origin: string };
  household: { adminDid: string; adminDocument: DidDocument; memberships: Record<Role, string> };
  enrollments: Record<Role, { enrollment: string }>;
  orders: Array<{ invoice: string; invoiceHash: string; childApproval: string }>;
}

/**
 * Issuing and verifying an `OrderApproval` (SPEC §13): Veramo's issue, and verification by the hot
 * path (`node:crypto`, cached keys) side by side with Veramo + SimpleWebAuthn, on the committed
 * Chromium evidence. `credential` is the approval JWT alone; `approvalLeg` is everything one
 * approver's evidence needs: approval, membership, enrollment and the passkey assertion.
 */
export async function identityBench(): Promise<Record<string, unknown>> {
  const fixture = JSON.parse(
    readFileSync(new URL('../../identity/fixtures/evidence.json', import.meta.url), 'utf8'),
  ) as Fixture;
  const now = new Date(fixture.generatedAt);
  const order = fixture.orders[0];
  if (!order) throw new Error('the evidence fixture has no order');
  const adminJwk = fixture.household.adminDocument.verificationMethod[0]?.publicKeyJwk ?? {};
  const hot = createCredentialVerifier(householdKeys({ adminDid: fixture.household.adminDid, adminJwk }));
  const veramo = createVeramoVerifier({ adminDocument: fixture.household.adminDocument });
  const leg = {
    invoice: order.invoice,
    approval: order.childApproval,
    role: 'child' as const,
    membership: fixture.household.memberships.child,
    enrollment: fixture.enrollments.child.enrollment,
  };
  const context = { adminDid: fixture.household.adminDid, webauthn: fixture.webauthn, now };
  const expectVerified = (verdict: { verified: boolean }) => {
    if (!verdict.verified) throw new Error('a benchmark verification failed');
  };

  const credential = await measureInterleaved(
    {
      hotPath: async () => expectVerified(await hot(order.childApproval, { type: 'OrderApproval', now })),
      veramo: async () => expectVerified(await veramo(order.childApproval, { type: 'OrderApproval', now })),
    },
    { iterations: 2_000, warmup: 100 },
  );
  const approvalLeg = await measureInterleaved(
    {
      hotPath: async () =>
        expectVerified(
          await verifyOrderApproval(leg, { ...context, verifyCredential: hot, verifyAssertion: verifyAssertionFast }),
        ),
      veramoAndSimpleWebAuthn: async () =>
        expectVerified(
          await verifyOrderApproval(leg, {
            ...context,
            verifyCredential: veramo,
            verifyAssertion: verifyAssertionWithSimpleWebAuthn,
          }),
        ),
    },
    { iterations: 1_000, warmup: 50 },
  );

  // Issuing: the member's key opens from the sealed store and Veramo signs, as every approval does.
  const dataDir = await mkdtemp(join(tmpdir(), 'bench-identity-'));
  const store = openSqliteHouseholdStore({ path: join(dataDir, 'household.sqlite') });
  try {
    const household = await openHousehold({ store: store.identity, dataDir });
    const passkey = JSON.parse(Buffer.from(order.childApproval.split('.')[1] ?? '', 'base64url').toString('utf8')).vc
      .credentialSubject.passkey as PasskeyAssertion;
    const issue = await measure(
      () =>
        household.issue({
          signer: 'child',
          type: 'OrderApproval',
          subject: household.members.child,
          claims: { role: 'child', invoiceHash: order.invoiceHash, approvalId: 'bench', passkey },
          now: new Date(),
        }),
      { iterations: 1_000, warmup: 50 },
    );
    return {
      orderApproval: { issueVeramo: issue, verifyCredential: credential, verifyApprovalLeg: approvalLeg },
      notes:
        'issueVeramo = household.issue of an OrderApproval (sealed key opened, Veramo JWT signed); verifyCredential = the approval JWT alone; verifyApprovalLeg = approval + FamilyMembership + PasskeyEnrollment + the Chromium passkey assertion, hot path (node:crypto, cached keys) vs Veramo + SimpleWebAuthn, interleaved.',
    };
  } finally {
    store.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}
