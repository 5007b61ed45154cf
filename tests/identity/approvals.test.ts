import type { Client } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  approvalTools,
  createCredentialVerifier,
  createVeramoVerifier,
  householdKeys,
  type Role,
  verifyAssertionFast,
  verifyAssertionWithSimpleWebAuthn,
  verifyOrderApproval,
} from '../../identity/index';
import { createGateway, type Gateway } from '../../proxy/index';
import { loadOrCreateMerchantKey } from '../../shop-agent/index';
import { signCredential } from '../../shop-agent/sign-credential';
import { callTool, connectClient, memoryLogger, searchNames, textOf } from '../proxy/helpers';
import { createIdentityHarness, type IdentityHarness, origin, rpId } from './support';

// The approval local tools, driven as a model drives them: a real MCP client on the real proxy,
// search first, then call_tool; the household's windows act through the passkey ceremonies.
let harness: IdentityHarness;
let gateway: Gateway;
let client: Client;

beforeEach(async () => {
  harness = await createIdentityHarness();
  gateway = createGateway({ embeddings: false, logger: memoryLogger(), localTools: approvalTools(harness.approvals) });
  await gateway.start();
  client = await connectClient(gateway);
  expect(await searchNames(client, 'request approval await approval record fulfillment', 10)).toEqual(
    expect.arrayContaining(['request_approval', 'await_approval', 'record_fulfillment']),
  );
});

afterEach(async () => {
  await client.close();
  await gateway.close();
  await harness.close();
});

async function invoice(
  totalCents: number,
  options: { signer?: Awaited<ReturnType<typeof loadOrCreateMerchantKey>>; subject?: Record<string, unknown> } = {},
) {
  const signer = options.signer ?? harness.merchant;
  const { jws } = await signCredential(signer, {
    type: 'Invoice',
    subject: {
      merchantId: signer.did,
      merchantName: 'Pizza Shop',
      items: [
        {
          sku: 'large-pepperoni',
          name: 'Large pepperoni',
          qty: 1,
          unitPriceCents: totalCents,
          listPriceCents: totalCents,
        },
      ],
      totalCents,
      currency: 'usd',
      deliverTo: '12 Main St',
      ...options.subject,
    },
    ttlSeconds: 300,
    now: harness.clock.now(),
  });
  return jws;
}

async function requestApproval(jws: string) {
  const result = await callTool(client, 'request_approval', { invoice: jws });
  return { result, body: result.isError ? undefined : (JSON.parse(textOf(result)) as Record<string, unknown>) };
}

async function stored() {
  return harness.householdStore.identity.approvals.listRecent(100);
}

/** The member of `role` approves through the real passkey ceremony, signed in by enrolment. */
async function approveAs(member: Awaited<ReturnType<IdentityHarness['enrol']>>, approvalId: string) {
  const started = await harness.passkeys.approval.options({ session: member.record, approvalId });
  if (!started.ok) throw new Error(started.reason);
  return harness.passkeys.approval.verify({
    session: member.record,
    ceremonyId: started.ceremonyId,
    response: member.authenticator.assert(started.options),
  });
}

describe('request_approval', () => {
  it('asks the child alone up to $10.00, the child and the parent above, and refuses above $200.00', async () => {
    const small = await requestApproval(await invoice(400));
    expect(small.body).toMatchObject({
      status: 'pending',
      requiredRoles: ['child'],
      approveUrls: { child: `${origin}/approve?as=child` },
    });
    const medium = await requestApproval(await invoice(1500));
    expect(medium.body).toMatchObject({
      status: 'pending',
      requiredRoles: ['child', 'parent'],
      approveUrls: { child: `${origin}/approve?as=child`, parent: `${origin}/approve?as=parent` },
    });
    const before = await stored();
    const large = await requestApproval(await invoice(30_000));
    expect(large.result.isError).toBe(true);
    expect(textOf(large.result)).toMatch(/\$300\.00 is over the household's limit of \$200\.00/);
    expect(await stored()).toEqual(before);
  });

  it('refuses at once, storing nothing: an untrusted merchant, a bad signature, an expired invoice', async () => {
    const stranger = await loadOrCreateMerchantKey(`${harness.dataDir}/stranger`);
    const good = await invoice(400);
    const [header, payload, signature = ''] = good.split('.');
    const flipped = Buffer.from(signature, 'base64url');
    flipped[0] = (flipped[0] ?? 0) ^ 1;
    const cases: Array<[string, string, RegExp]> = [
      ['untrusted merchant', await invoice(400, { signer: stranger }), /not from a merchant the household trusts/],
      ['bad signature', `${header}.${payload}.${flipped.toString('base64url')}`, /signature does not verify/],
      ['not a JWS', 'hello', /not from a merchant the household trusts|not a signed invoice/],
      [
        'another merchant named than the signer',
        await invoice(400, { subject: { merchantId: stranger.did } }),
        /names another merchant than its signer/,
      ],
      [
        'a total that is not the sum of its lines',
        await invoice(400, { subject: { totalCents: 300 } }),
        /not the sum of its lines/,
      ],
      ['another currency', await invoice(400, { subject: { currency: 'eur' } }), /terms are not well-formed/],
    ];
    for (const [name, jws, reason] of cases) {
      const { result } = await requestApproval(jws);
      expect(result.isError, name).toBe(true);
      expect(textOf(result), name).toMatch(reason);
    }
    const expiring = await invoice(400);
    harness.clock.advance(5 * 60 * 1000);
    const expired = await requestApproval(expiring);
    expect(textOf(expired.result)).toMatch(/has expired/);
    expect(await stored()).toEqual([]);
  });

  it('returns the same request when asked twice for one invoice', async () => {
    const jws = await invoice(400);
    const first = await requestApproval(jws);
    const second = await requestApproval(jws);
    expect(second.body?.approvalId).toBe(first.body?.approvalId);
    expect(await stored()).toHaveLength(1);
  });
});

describe('approvals and await_approval', () => {
  it('completes a $15 order only after both passkeys, and the evidence verifies with both verifiers', async () => {
    const child = await harness.enrol('child');
    const parent = await harness.enrol('parent');
    const jws = await invoice(1500);
    const { body } = await requestApproval(jws);
    const approvalId = String(body?.approvalId);

    expect(await approveAs(child, approvalId)).toMatchObject({ verified: true });
    const waiting = await callTool(client, 'await_approval', { approvalId, timeoutSeconds: 1 });
    expect(JSON.parse(textOf(waiting))).toEqual({ status: 'pending', approvalId, waitingFor: ['parent'] });

    expect(await approveAs(parent, approvalId)).toMatchObject({ verified: true });
    const done = JSON.parse(textOf(await callTool(client, 'await_approval', { approvalId })));
    expect(done).toMatchObject({ status: 'approved', approvalId, evidence: { invoice: jws } });

    const enrollments = await Promise.all(
      (['child', 'parent'] as const).map(
        async (role) => (await harness.householdStore.identity.passkeys.listByRole(role))[0],
      ),
    );
    const verifiers = [
      {
        verifyCredential: createCredentialVerifier(householdKeys(harness.household)),
        verifyAssertion: verifyAssertionFast,
      },
      {
        verifyCredential: createVeramoVerifier({ adminDocument: harness.household.adminDocument }),
        verifyAssertion: verifyAssertionWithSimpleWebAuthn,
      },
    ];
    for (const pair of verifiers) {
      for (const [index, role] of (['child', 'parent'] as Role[]).entries()) {
        const verdict = await verifyOrderApproval(
          {
            invoice: jws,
            approval: done.evidence[`${role}Approval`],
            role,
            membership: harness.household.memberships[role],
            enrollment: enrollments[index]?.enrollment ?? '',
          },
          { adminDid: harness.household.adminDid, webauthn: { rpId, origin }, now: harness.clock.now(), ...pair },
        );
        expect(verdict, role).toMatchObject({ verified: true, approval: { sub: harness.household.members[role] } });
      }
      // The child's approval does not stand in for the parent's.
      const swapped = await verifyOrderApproval(
        {
          invoice: jws,
          approval: done.evidence.childApproval,
          role: 'parent',
          membership: harness.household.memberships.parent,
          enrollment: enrollments[1]?.enrollment ?? '',
        },
        { adminDid: harness.household.adminDid, webauthn: { rpId, origin }, now: harness.clock.now(), ...pair },
      );
      expect(swapped).toMatchObject({
        verified: false,
        reason: expect.stringMatching(/child approval, not a parent one/),
      });
    }
  });

  it('an approval for invoice A cannot be used for invoice B', async () => {
    const child = await harness.enrol('child');
    const invoiceA = await invoice(400);
    const invoiceB = await invoice(500);
    const a = String((await requestApproval(invoiceA)).body?.approvalId);
    const b = String((await requestApproval(invoiceB)).body?.approvalId);
    expect(await approveAs(child, a)).toMatchObject({ verified: true });
    const evidenceA = JSON.parse(textOf(await callTool(client, 'await_approval', { approvalId: a })));

    // Presenting A's approval as evidence for B fails the binding to B's hash.
    const passkey = (await harness.householdStore.identity.passkeys.listByRole('child'))[0];
    const verdict = await verifyOrderApproval(
      {
        invoice: invoiceB,
        approval: evidenceA.evidence.childApproval,
        role: 'child',
        membership: harness.household.memberships.child,
        enrollment: passkey?.enrollment ?? '',
      },
      {
        adminDid: harness.household.adminDid,
        webauthn: { rpId, origin },
        now: harness.clock.now(),
        verifyCredential: createCredentialVerifier(householdKeys(harness.household)),
        verifyAssertion: verifyAssertionFast,
      },
    );
    expect(verdict).toMatchObject({ verified: false, reason: expect.stringMatching(/approves another invoice/) });

    // And A's passkey assertion cannot approve B: its challenge is A's hash.
    const claims = JSON.parse(Buffer.from(evidenceA.evidence.childApproval.split('.')[1], 'base64url').toString());
    const reused = await harness.approvals.approve({
      approvalId: b,
      role: 'child',
      assertion: claims.vc.credentialSubject.passkey,
    });
    expect(reused).toMatchObject({ ok: false, reason: expect.stringMatching(/another challenge/) });
    // Nor can the child's passkey approve as the parent, even over the right invoice.
    const large = String((await requestApproval(await invoice(1500))).body?.approvalId);
    const asParent = await harness.approvals.approve({
      approvalId: large,
      role: 'parent',
      assertion: claims.vc.credentialSubject.passkey,
    });
    expect(asParent).toMatchObject({ ok: false, reason: 'the passkey is not enrolled for the parent' });
    expect((await harness.householdStore.identity.approvals.get(b))?.approvals).toEqual({});
  });

  it('a decline and an expiry reach await_approval', async () => {
    await harness.enrol('child');
    const declined = String((await requestApproval(await invoice(400))).body?.approvalId);
    const waiting = callTool(client, 'await_approval', { approvalId: declined, timeoutSeconds: 120 });
    await harness.approvals.decline({ approvalId: declined, role: 'child' });
    expect(JSON.parse(textOf(await waiting))).toEqual({
      status: 'declined',
      approvalId: declined,
      reason: 'the child declined the order',
    });

    const expiring = String((await requestApproval(await invoice(400))).body?.approvalId);
    harness.clock.advance(5 * 60 * 1000);
    expect(JSON.parse(textOf(await callTool(client, 'await_approval', { approvalId: expiring })))).toMatchObject({
      status: 'expired',
      reason: expect.stringMatching(/invoice expired/),
    });
    expect(harness.events.map((event) => event.kind)).toEqual(
      expect.arrayContaining(['approval-declined', 'approval-expired']),
    );
  });

  it('two sessions waiting at once do not block each other', async () => {
    const child = await harness.enrol('child');
    const first = String((await requestApproval(await invoice(400))).body?.approvalId);
    const second = String((await requestApproval(await invoice(600))).body?.approvalId);
    const other = await connectClient(gateway);
    try {
      expect(await searchNames(other, 'await approval')).toContain('await_approval');
      let firstSettled = false;
      const firstWait = callTool(client, 'await_approval', { approvalId: first, timeoutSeconds: 120 }).then(
        (result) => {
          firstSettled = true;
          return result;
        },
      );
      const secondWait = callTool(other, 'await_approval', { approvalId: second, timeoutSeconds: 120 });
      await approveAs(child, second);
      expect(JSON.parse(textOf(await secondWait))).toMatchObject({ status: 'approved', approvalId: second });
      expect(firstSettled).toBe(false);
      await harness.approvals.decline({ approvalId: first, role: 'child' });
      expect(JSON.parse(textOf(await firstWait))).toMatchObject({ status: 'declined', approvalId: first });
    } finally {
      await other.close();
    }
  });
});

describe('the model cannot trust a merchant, enrol a passkey or choose a role', () => {
  it('offers no tool for it, and call_tool refuses every name it might try', async () => {
    for (const query of [
      'trust merchant add merchant',
      'enrol register passkey enrollment code',
      'sign in as parent role',
    ]) {
      const found = await searchNames(client, query, 20);
      expect(found.every((name) => ['request_approval', 'await_approval', 'record_fulfillment'].includes(name))).toBe(
        true,
      );
    }
    for (const name of [
      'trust_merchant',
      'add_trusted_merchant',
      'enroll_passkey',
      'register_passkey',
      'approve',
      'set_role',
    ]) {
      const result = await callTool(client, name, { did: harness.merchant.did, role: 'parent' });
      expect(result.isError, name).toBe(true);
    }
    expect(await harness.householdStore.identity.passkeys.listByRole('parent')).toEqual([]);
  });

  it('refuses a role, roles or an approver smuggled into the tools, storing nothing', async () => {
    const jws = await invoice(1500);
    for (const extra of [{ role: 'parent' }, { requiredRoles: ['child'] }, { approvedBy: 'parent' }]) {
      const smuggled = await callTool(client, 'request_approval', { invoice: jws, ...extra });
      expect(smuggled.isError, JSON.stringify(extra)).toBe(true);
    }
    expect(await stored()).toEqual([]);
    await requestApproval(jws);
    const [record] = await stored();
    expect(record?.requiredRoles).toEqual(['child', 'parent']);
    const waited = await callTool(client, 'await_approval', { approvalId: record?.approvalId, role: 'parent' });
    expect(waited.isError).toBe(true);
  });
});

describe("the model cannot name a member or set the household's time zone", () => {
  it('offers no tool for it, call_tool refuses every name it might try, and a smuggled name is refused', async () => {
    const zone = await harness.householdStore.identity.profile.timeZone();
    for (const query of ['name member rename child parent display name', 'household time zone settings']) {
      const found = await searchNames(client, query, 20);
      expect(found.every((name) => ['request_approval', 'await_approval', 'record_fulfillment'].includes(name))).toBe(
        true,
      );
    }
    for (const name of ['set_member_name', 'rename_member', 'set_time_zone', 'update_household']) {
      const result = await callTool(client, name, { names: { child: 'Mum' }, timeZone: 'Asia/Tokyo' });
      expect(result.isError, name).toBe(true);
    }
    const smuggled = await callTool(client, 'request_approval', {
      invoice: await invoice(400),
      names: { child: 'Mum' },
      timeZone: 'Asia/Tokyo',
    });
    expect(smuggled.isError).toBe(true);
    expect(await harness.householdStore.identity.profile.names()).toEqual([]);
    expect(await harness.householdStore.identity.profile.timeZone()).toStrictEqual(zone);
  });
});

describe('record_fulfillment', () => {
  it('completes a settled order once, against the merchant that signed its invoice and the payment made', async () => {
    const child = await harness.enrol('child');
    const jws = await invoice(400);
    const approvalId = String((await requestApproval(jws)).body?.approvalId);
    await approveAs(child, approvalId);
    const record = await harness.householdStore.identity.approvals.get(approvalId);
    const receipt = await harness.household.issue({
      signer: 'settlement',
      type: 'PaymentReceipt',
      subject: harness.merchant.did,
      claims: { invoiceId: record?.invoiceId, paymentRef: 'mock_pay_1', amountCents: 400, status: 'succeeded' },
      now: harness.clock.now(),
    });
    const commitment = async (paymentRef: string, signer = harness.merchant) =>
      (
        await signCredential(signer, {
          type: 'FulfilmentCommitment',
          subject: { invoiceId: record?.invoiceId, items: [], deliverTo: '12 Main St', paymentRef, etaMinutes: 25 },
          ttlSeconds: 3600,
          now: harness.clock.now(),
        })
      ).jws;

    // Not settled yet.
    const early = await callTool(client, 'record_fulfillment', { commitment: await commitment('mock_pay_1') });
    expect(textOf(early)).toMatch(/not settled/);
    expect(await harness.approvals.settle({ approvalId, receipt })).toMatchObject({ ok: true });

    const stranger = await loadOrCreateMerchantKey(`${harness.dataDir}/stranger`);
    expect(
      textOf(await callTool(client, 'record_fulfillment', { commitment: await commitment('mock_pay_1', stranger) })),
    ).toMatch(/not from a merchant the household trusts/);
    expect(textOf(await callTool(client, 'record_fulfillment', { commitment: await commitment('other_pay') }))).toMatch(
      /another payment/,
    );
    const done = await callTool(client, 'record_fulfillment', { commitment: await commitment('mock_pay_1') });
    expect(JSON.parse(textOf(done))).toEqual({ approvalId, status: 'fulfilled' });
    const again = await callTool(client, 'record_fulfillment', { commitment: await commitment('mock_pay_1') });
    expect(again.isError).toBe(true);
  });
});

describe('one approval leg, forged with the household’s own keys', () => {
  it('refuses a self-declared role, a membership or enrollment that does not match, and an approval about another member', async () => {
    const child = await harness.enrol('child');
    const jws = await invoice(1500);
    const approvalId = String((await requestApproval(jws)).body?.approvalId);
    await approveAs(child, approvalId);
    const record = await harness.householdStore.identity.approvals.get(approvalId);
    const passkey = (await harness.householdStore.identity.passkeys.listByRole('child'))[0];
    if (!record?.approvals.child || !passkey) throw new Error('the child did not approve');
    const { household } = harness;
    const now = harness.clock.now();
    const genuine = JSON.parse(Buffer.from(record.approvals.child.split('.')[1] ?? '', 'base64url').toString()).vc
      .credentialSubject;
    const issue = (
      signer: 'admin' | Role,
      type: 'OrderApproval' | 'FamilyMembership' | 'PasskeyEnrollment',
      subject: string,
      claims: Record<string, unknown>,
    ) => household.issue({ signer, type, subject, claims, now });
    const verify = (evidence: Parameters<typeof verifyOrderApproval>[0]) =>
      verifyOrderApproval(evidence, {
        adminDid: household.adminDid,
        webauthn: { rpId, origin },
        now,
        verifyCredential: createCredentialVerifier(householdKeys(household)),
        verifyAssertion: verifyAssertionFast,
      });
    const childLeg = {
      invoice: jws,
      approval: record.approvals.child,
      role: 'child' as const,
      membership: household.memberships.child,
      enrollment: passkey.enrollment,
    };
    expect(await verify(childLeg)).toMatchObject({ verified: true });

    const cases: Array<[string, Parameters<typeof verifyOrderApproval>[0], RegExp]> = [
      [
        'the child signs an approval claiming the parent role',
        {
          ...childLeg,
          role: 'parent',
          approval: await issue('child', 'OrderApproval', household.members.child, { ...genuine, role: 'parent' }),
        },
        /the member is not the parent/,
      ],
      [
        "a membership naming the parent's DID with the child's role",
        {
          ...childLeg,
          membership: await issue('admin', 'FamilyMembership', household.members.parent, {
            role: 'child',
            household: household.adminDid,
          }),
        },
        /membership is for another member/,
      ],
      [
        'an enrollment of the same key under another credential id',
        {
          ...childLeg,
          enrollment: await issue('admin', 'PasskeyEnrollment', household.members.child, {
            role: 'child',
            credentialId: 'another-credential',
            publicKeyJwk: passkey.publicKeyJwk,
          }),
        },
        /not the enrolled one/,
      ],
      [
        'an approval the child signs about the parent',
        { ...childLeg, approval: await issue('child', 'OrderApproval', household.members.parent, genuine) },
        /approves for someone other than its signer/,
      ],
      [
        'an approval the admin signs',
        { ...childLeg, approval: await issue('admin', 'OrderApproval', household.adminDid, genuine) },
        /not signed by a member/,
      ],
    ];
    for (const [name, evidence, reason] of cases) {
      expect(await verify(evidence), name).toMatchObject({ verified: false, reason: expect.stringMatching(reason) });
    }
  });
});
