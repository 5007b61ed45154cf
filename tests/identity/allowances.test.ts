import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type Allowances,
  type AllowanceTerms,
  allowanceHashOf,
  createAllowances,
  createCredentialVerifier,
  householdKeys,
  periodKeyOf,
  verifyAllowance,
  verifyAssertionFast,
} from '../../identity/index';
import { createSqliteAllowanceStore } from '../../lib/sqlite-allowance-store';
import { assertCall } from './call-approval-support';
import type { SoftwareAuthenticator } from './software-authenticator';
import { createIdentityHarness, type IdentityHarness, origin, rpId } from './support';

let harness: IdentityHarness;
let allowances: Allowances;
let parent: SoftwareAuthenticator;
let child: SoftwareAuthenticator;
const day = 24 * 60 * 60;

beforeEach(async () => {
  harness = await createIdentityHarness();
  allowances = createAllowances({
    household: harness.household,
    store: harness.householdStore.allowances,
    origin,
    rpId,
    clock: harness.clock.now,
  });
  parent = (await harness.enrol('parent')).authenticator;
  child = (await harness.enrol('child')).authenticator;
});
afterEach(async () => {
  await harness.close();
});

const nowSeconds = () => Math.floor(harness.clock.now().getTime() / 1000);

function draft(overrides: Partial<Parameters<Allowances['draft']>[0]> = {}) {
  const drafted = allowances.draft({
    merchantDid: harness.merchant.did,
    merchantName: 'Main Street Pizza',
    perOrderCapCents: 500,
    budgetCents: 1000,
    period: 'day',
    timeZone: 'Europe/Paris',
    expiresAt: nowSeconds() + 30 * day,
    ...overrides,
  });
  if (!drafted.ok) throw new Error(drafted.reason);
  return drafted;
}

/** The parent signs fresh terms with the passkey; returns the stored record and its terms. */
async function signed(overrides: Partial<Parameters<Allowances['draft']>[0]> = {}) {
  const { terms, termsHash } = draft(overrides);
  const issued = await allowances.issue({ terms, assertion: assertCall(parent, termsHash) });
  if (!issued.ok) throw new Error(issued.reason);
  return { record: issued.record, terms };
}

async function verify(allowance: string) {
  const [passkey] = await harness.householdStore.identity.passkeys.listByRole('parent');
  const enrollment = passkey?.enrollment ?? '';
  return verifyAllowance(
    { allowance, membership: harness.household.memberships.parent, enrollment },
    {
      adminDid: harness.household.adminDid,
      webauthn: { rpId, origin },
      now: harness.clock.now(),
      verifyCredential: createCredentialVerifier(householdKeys(harness.household)),
      verifyAssertion: verifyAssertionFast,
    },
  );
}

const order = (totalCents: number, invoiceId: string, terms: AllowanceTerms) => ({
  allowanceId: terms.id,
  invoiceId,
  childDid: harness.household.members.child,
  merchantDid: harness.merchant.did,
  totalCents,
});

describe('period keys', () => {
  it("count a day in the terms' time zone, never the server's", () => {
    const late = new Date('2026-06-01T22:30:00Z');
    expect(periodKeyOf({ period: 'day', timeZone: 'UTC' }, late)).toBe('2026-06-01');
    expect(periodKeyOf({ period: 'day', timeZone: 'Europe/Paris' }, late)).toBe('2026-06-02');
    expect(periodKeyOf({ period: 'day', timeZone: 'America/Los_Angeles' }, late)).toBe('2026-06-01');
  });

  it('count a week as the ISO week of the local date', () => {
    expect(periodKeyOf({ period: 'week', timeZone: 'UTC' }, new Date('2026-12-03T12:00:00Z'))).toBe('2026-W49');
    expect(periodKeyOf({ period: 'week', timeZone: 'UTC' }, new Date('2027-01-01T12:00:00Z'))).toBe('2026-W53');
    // Sunday night in UTC is already Monday in Tokyo: the next week there.
    const sunday = new Date('2026-12-06T20:00:00Z');
    expect(periodKeyOf({ period: 'week', timeZone: 'UTC' }, sunday)).toBe('2026-W49');
    expect(periodKeyOf({ period: 'week', timeZone: 'Asia/Tokyo' }, sunday)).toBe('2026-W50');
  });
});

describe('issuing', () => {
  it("signs the Allowance as the household over the parent's passkey yes to exactly those terms", async () => {
    const { record, terms } = await signed();
    const verdict = await verify(record.credential);
    expect(verdict).toMatchObject({ verified: true, terms });
    if (!verdict.verified) return;
    expect(verdict.credential.iss).toBe(harness.household.adminDid);
    expect(verdict.credential.sub).toBe(harness.household.members.parent);
    expect(verdict.credential.exp).toBe(terms.expiresAt);
    expect(terms).toMatchObject({ childDid: harness.household.members.child, timeZone: 'Europe/Paris' });
  });

  it("refuses the child's passkey, an assertion over other terms, and bad terms; nothing is stored", async () => {
    const { terms, termsHash } = draft();
    expect(await allowances.issue({ terms, assertion: assertCall(child, termsHash) })).toEqual({
      ok: false,
      reason: 'the passkey is not enrolled for the parent',
    });
    const other = draft({ budgetCents: 5000 });
    expect(await allowances.issue({ terms, assertion: assertCall(parent, other.termsHash) })).toMatchObject({
      ok: false,
      reason: expect.stringContaining('another challenge'),
    });
    // The parent signed $10.00 a day; terms saying $50.00 do not carry that signature.
    expect(
      await allowances.issue({ terms: { ...terms, budgetCents: 5000 }, assertion: assertCall(parent, termsHash) }),
    ).toMatchObject({ ok: false, reason: expect.stringContaining('another challenge') });
    expect(allowances.draft({ ...draftInput(), timeZone: 'Mars/Olympus' })).toMatchObject({ ok: false });
    expect(allowances.draft({ ...draftInput(), perOrderCapCents: 2000 })).toMatchObject({ ok: false });
    expect(allowances.draft({ ...draftInput(), expiresAt: nowSeconds() + 400 * day })).toMatchObject({ ok: false });
    expect(await harness.householdStore.allowances.list()).toEqual([]);
  });
});

function draftInput() {
  return {
    merchantDid: harness.merchant.did,
    merchantName: 'Main Street Pizza',
    perOrderCapCents: 500,
    budgetCents: 1000,
    period: 'day' as const,
    timeZone: 'UTC',
    expiresAt: nowSeconds() + day,
  };
}

describe('verifying', () => {
  it('refuses a forged allowance, one signed by the child, tampered terms, and an expired one', async () => {
    const { record, terms } = await signed();
    // Forged: the payload changed (a bigger cap) under the household's signature.
    const [header, body, signature] = record.credential.split('.');
    const payload = JSON.parse(Buffer.from(body ?? '', 'base64url').toString('utf8'));
    payload.vc.credentialSubject.terms = payload.vc.credentialSubject.terms.replace(
      '"perOrderCapCents":500',
      '"perOrderCapCents":900',
    );
    const forged = `${header}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${signature}`;
    expect(await verify(forged)).toMatchObject({ verified: false, reason: expect.stringContaining('signature') });
    // Signed by the child's own key instead of the household's.
    const bySelf = await harness.household.issue({
      signer: 'child',
      type: 'Allowance',
      subject: harness.household.members.parent,
      claims: JSON.parse(Buffer.from(body ?? '', 'base64url').toString('utf8')).vc.credentialSubject,
      now: harness.clock.now(),
      expiresAt: new Date(terms.expiresAt * 1000),
    });
    expect(await verify(bySelf)).toMatchObject({ verified: false, reason: expect.stringContaining('not by') });
    // The household signing terms the parent's passkey did not sign.
    const claims = JSON.parse(Buffer.from(body ?? '', 'base64url').toString('utf8')).vc.credentialSubject;
    const swapped = await harness.household.issue({
      signer: 'admin',
      type: 'Allowance',
      subject: harness.household.members.parent,
      claims: { ...claims, terms: claims.terms.replace('"budgetCents":1000', '"budgetCents":2000') },
      now: harness.clock.now(),
      expiresAt: new Date(terms.expiresAt * 1000),
    });
    expect(await verify(swapped)).toMatchObject({
      verified: false,
      reason: 'the allowance: its terms hash is not the hash of its terms',
    });
    // Terms and hash both changed: the parent's passkey signed neither.
    const rehashed = claims.terms.replace('"budgetCents":1000', '"budgetCents":2000');
    const unsigned = await harness.household.issue({
      signer: 'admin',
      type: 'Allowance',
      subject: harness.household.members.parent,
      claims: { ...claims, terms: rehashed, termsHash: allowanceHashOf(rehashed) },
      now: harness.clock.now(),
      expiresAt: new Date(terms.expiresAt * 1000),
    });
    expect(await verify(unsigned)).toMatchObject({
      verified: false,
      reason: expect.stringContaining('another challenge'),
    });
    expect(await verify(record.credential)).toMatchObject({ verified: true });
    harness.clock.advance(31 * day * 1000);
    expect(await verify(record.credential)).toMatchObject({
      verified: false,
      reason: expect.stringContaining('expired'),
    });
  });
});

describe('covering and spending', () => {
  it("covers the child's orders at its merchant within the cap and the day's budget", async () => {
    const { terms } = await signed();
    const childDid = harness.household.members.child;
    const at = { childDid, merchantDid: harness.merchant.did };
    expect(await allowances.cover({ ...at, totalCents: 400 })).toEqual({
      status: 'covered',
      allowanceId: terms.id,
      remainingCents: 600,
    });
    expect(await allowances.cover({ ...at, totalCents: 600 })).toMatchObject({
      status: 'not-covered',
      reason: expect.stringContaining('per-order cap'),
    });
    expect(await allowances.cover({ childDid, merchantDid: 'did:web:other.example', totalCents: 400 })).toEqual({
      status: 'none',
    });
    expect(await allowances.hold(order(400, 'inv-1', terms))).toMatchObject({ ok: true, remainingCents: 600 });
    expect(await allowances.hold(order(400, 'inv-2', terms))).toMatchObject({ ok: true, remainingCents: 200 });
    expect(await allowances.cover({ ...at, totalCents: 400 })).toMatchObject({
      status: 'not-covered',
      reason: 'the allowance’s daily budget is spent',
      cause: 'budget-spent',
      period: 'day',
    });
    // A refusal names the period, for the words of the hand-over to the parent.
    expect(await allowances.hold(order(400, 'inv-3', terms))).toEqual({
      ok: false,
      reason: 'over-budget',
      remainingCents: 200,
      period: 'day',
    });
    // A declined charge frees its amount; a retry of a held order holds nothing more.
    await allowances.release('inv-2');
    expect(await allowances.hold(order(400, 'inv-1', terms))).toMatchObject({ ok: true, existing: true });
    expect(await allowances.hold(order(400, 'inv-3', terms))).toMatchObject({ ok: true, remainingCents: 200 });
    // The next day in Paris, the budget is whole again.
    harness.clock.advance(day * 1000);
    expect(await allowances.cover({ ...at, totalCents: 400 })).toMatchObject({
      status: 'covered',
      remainingCents: 600,
    });
    expect((await allowances.list())[0]).toMatchObject({ state: 'active', remainingCents: 1000 });
  });

  it('lets exactly two of 20 parallel $4 orders spend a $10.00 day, across two connections to the file', async () => {
    const { terms } = await signed();
    const other = new Database(join(harness.dataDir, 'household.sqlite'));
    other.pragma('busy_timeout = 5000');
    const second = createAllowances({
      household: harness.household,
      store: createSqliteAllowanceStore(other),
      origin,
      rpId,
      clock: harness.clock.now,
    });
    try {
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, (_, index) =>
          (index % 2 === 0 ? allowances : second).hold(order(400, `inv-${index}`, terms)),
        ),
      );
      expect(outcomes.filter((outcome) => outcome.ok)).toHaveLength(2);
      expect(outcomes.filter((outcome) => !outcome.ok && outcome.reason === 'over-budget')).toHaveLength(18);
      expect(
        await harness.householdStore.allowances.spentCents(terms.id, periodKeyOf(terms, harness.clock.now())),
      ).toBe(800);
    } finally {
      other.close();
    }
  });

  it('orders a revocation racing charges: each charge held before it, or refused', async () => {
    const { terms } = await signed({ budgetCents: 20_000, perOrderCapCents: 500 });
    // Ten orders first, then a revocation started together with ten more.
    const first = await Promise.all(
      Array.from({ length: 10 }, (_, index) => allowances.hold(order(400, `inv-${index}`, terms))),
    );
    const revoked = allowances.revoke(terms.id);
    const later = Array.from({ length: 10 }, (_, index) => allowances.hold(order(400, `inv-${index + 10}`, terms)));
    const outcomes = [...first, ...(await Promise.all(later))];
    expect(await revoked).toMatchObject({ ok: true });
    const record = await harness.householdStore.allowances.get(terms.id);
    const cutoff = record?.revokedAfterSequence;
    expect(cutoff).toBeTypeOf('number');
    for (const [index, outcome] of outcomes.entries()) {
      const held = await harness.householdStore.allowances.holdOf(`inv-${index}`);
      if (outcome.ok) expect(held?.sequence).toBeLessThanOrEqual(cutoff ?? -1);
      else expect(outcome).toMatchObject({ reason: 'revoked' });
    }
    // Some landed on each side, so the race was real.
    expect(outcomes.some((outcome) => outcome.ok)).toBe(true);
    expect(outcomes.some((outcome) => !outcome.ok)).toBe(true);
    // After it, nothing new is held, the window says so, and the allowance covers nothing.
    expect(await allowances.hold(order(400, 'inv-late', terms))).toEqual({
      ok: false,
      reason: 'revoked',
      period: 'day',
    });
    expect((await allowances.list())[0]).toMatchObject({ state: 'revoked', remainingCents: 0 });
    expect(
      await allowances.cover({ childDid: terms.childDid, merchantDid: terms.merchantDid, totalCents: 400 }),
    ).toMatchObject({ status: 'not-covered', reason: 'the parent revoked the allowance', cause: 'revoked' });
    expect(await allowances.revoke(terms.id)).toEqual({ ok: false, reason: 'the allowance is already revoked' });
  });
});
