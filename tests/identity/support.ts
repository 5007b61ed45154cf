/**
 * Shared setup of the identity tests: a temp data folder with the real household store (SQLite),
 * the real household (Veramo), approvals and passkeys over one injectable clock, a trusted
 * merchant whose invoices are signed by the shop's own signer, and a software authenticator per
 * member.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Allowances, createAllowances } from '../../identity/allowances';
import { type Approvals, createApprovals } from '../../identity/approvals';
import { issueEnrollmentCodes } from '../../identity/enrollment-codes';
import type { IdentityEvent } from '../../identity/events';
import { type Household, openHousehold } from '../../identity/household';
import { createPasskeys, hashSessionToken, type Passkeys, type SignedInSession } from '../../identity/passkeys';
import type { Role, SessionRecord } from '../../identity/store';
import { type HouseholdStore, openSqliteHouseholdStore } from '../../lib/store';
import { loadOrCreateMerchantKey, type MerchantKey } from '../../shop-agent/index';
import { signCredential } from '../../shop-agent/sign-credential';
import { createSoftwareAuthenticator, type SoftwareAuthenticator } from './software-authenticator';

export const origin = 'http://localhost:3000';
export const rpId = 'localhost';

/** A clock the tests move by hand. */
export interface TestClock {
  now(): Date;
  advance(ms: number): void;
}

/** One household with everything wired, in a fresh temp folder. */
export interface IdentityHarness {
  readonly dataDir: string;
  readonly householdStore: HouseholdStore;
  readonly household: Household;
  readonly approvals: Approvals;
  readonly passkeys: Passkeys;
  /** The parent's standing allowances, wired into approvals and passkeys as the app does. */
  readonly allowances: Allowances;
  /** Every event identity emitted, in order. */
  readonly events: IdentityEvent[];
  readonly clock: TestClock;
  readonly merchant: MerchantKey;
  /** Fresh enrollment codes for every role without a passkey (or the roles named). */
  codes(roles?: readonly Role[]): Promise<Partial<Record<Role, string>>>;
  /** A new software authenticator for this site. */
  authenticator(): SoftwareAuthenticator;
  /** Registers a passkey for the role through the real ceremony; returns its authenticator and session. */
  enrol(role: Role): Promise<{ authenticator: SoftwareAuthenticator; session: SignedInSession; record: SessionRecord }>;
  /** A merchant-signed invoice for `totalCents`, turned into a pending approval request. */
  requestApproval(totalCents: number): Promise<{ approvalId: string; invoiceId: string; invoiceHash: string }>;
  close(): Promise<void>;
}

/** Opens a household in a temp folder; `close()` removes it. */
export async function createIdentityHarness(): Promise<IdentityHarness> {
  const dataDir = await mkdtemp(join(tmpdir(), 'emcp-identity-'));
  let current = new Date('2026-06-01T10:00:00.000Z').getTime();
  const clock: TestClock = {
    now: () => new Date(current),
    advance: (ms) => {
      current += ms;
    },
  };
  const events: IdentityEvent[] = [];
  const sink = (event: IdentityEvent) => {
    events.push(event);
  };
  const householdStore = openSqliteHouseholdStore({ path: join(dataDir, 'household.sqlite') });
  const household = await openHousehold({ store: householdStore.identity, dataDir, now: clock.now });
  const allowances = createAllowances({
    household,
    store: householdStore.allowances,
    origin,
    rpId,
    clock: clock.now,
  });
  const approvals = createApprovals({ household, origin, rpId, allowances, events: sink, clock: clock.now });
  const passkeys = createPasskeys({ household, approvals, allowances, rpId, origin, events: sink, clock: clock.now });
  const merchant = await loadOrCreateMerchantKey(join(dataDir, 'merchant'));
  await householdStore.identity.merchants.add({
    did: merchant.did,
    name: 'Pizza Shop',
    publicKeyJwk: merchant.publicJwk,
    trustedAt: clock.now().getTime(),
  });

  const harness: IdentityHarness = {
    dataDir,
    householdStore,
    household,
    approvals,
    passkeys,
    allowances,
    events,
    clock,
    merchant,

    async codes(roles) {
      const issued = await issueEnrollmentCodes({
        store: householdStore.identity,
        now: clock.now(),
        ...(roles === undefined ? {} : { roles }),
      });
      return Object.fromEntries(issued.map(({ role, code }) => [role, code]));
    },

    authenticator: () => createSoftwareAuthenticator({ origin, rpId }),

    async enrol(role) {
      const code = (await harness.codes([role]))[role] ?? '';
      const authenticator = harness.authenticator();
      const started = await passkeys.registration.options({ code });
      if (!started.ok) throw new Error(`registration options refused: ${started.reason}`);
      const result = await passkeys.registration.verify({
        ceremonyId: started.ceremonyId,
        response: authenticator.register(started.options),
      });
      if (!result.verified) throw new Error(`registration refused: ${result.reason}`);
      const record = await householdStore.identity.sessions.get(hashSessionToken(result.session.token));
      if (record === undefined) throw new Error('the session was not stored');
      return { authenticator, session: result.session, record };
    },

    async requestApproval(totalCents) {
      const { jws } = await signCredential(merchant, {
        type: 'Invoice',
        subject: {
          merchantId: merchant.did,
          merchantName: 'Pizza Shop',
          items: [
            { sku: 'slice', name: 'Cheese slice', qty: 1, unitPriceCents: totalCents, listPriceCents: totalCents },
          ],
          totalCents,
          currency: 'usd',
          deliverTo: '12 Main St',
        },
        ttlSeconds: 5 * 60,
        now: clock.now(),
      });
      const outcome = await approvals.request(jws);
      if (!outcome.ok) throw new Error(`approval request refused: ${outcome.reason}`);
      const record = await householdStore.identity.approvals.get(outcome.approvalId);
      return {
        approvalId: outcome.approvalId,
        invoiceId: record?.invoiceId ?? '',
        invoiceHash: record?.invoiceHash ?? '',
      };
    },

    async close() {
      householdStore.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return harness;
}

/** A second instance's handle on the harness's household file: its own connection. The caller closes it. */
export function openAnotherHandle(harness: IdentityHarness): HouseholdStore {
  return openSqliteHouseholdStore({ path: join(harness.dataDir, 'household.sqlite') });
}
