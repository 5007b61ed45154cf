import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyMigrations } from '../../lib/apply-migrations';
import {
  createMemoryMockRailStore,
  createMockRail,
  createSqliteMockRailStore,
  type MockRailStore,
  mockRailMigrations,
} from '../../lib/payments/mock-rail';
import { PaymentError } from '../../lib/payments/payment-error';
import type { ChargeRequest, PaymentRail } from '../../lib/payments/rail';
import { createStripeRail } from '../../lib/payments/stripe-rail';
import { type FakeStripe, startFakeStripe } from './fake-stripe';

/** The amount every harness's issuer declines, with this code. */
const declinedAmountCents = 4_02;
const declineCode = 'insufficient_funds';

/** What the contract needs from each rail under test, beyond the rail itself. */
interface RailHarness {
  readonly rail: PaymentRail;
  /** Charges that actually moved money. */
  charges(): number;
  /**
   * Arranges for the next charge to move money and then leave the caller with an unknown outcome
   * (a crash or timeout after the charge). Returns the signal to pass to that charge.
   */
  unknownOutcomeAfterNextCharge(): AbortSignal | undefined;
  close(): Promise<void>;
}

/** Counts the inserts of succeeded charges: money the mock rail moved. */
function countingStore(store: MockRailStore): { store: MockRailStore; charges(): number } {
  let charges = 0;
  return {
    charges: () => charges,
    store: {
      find: (key) => store.find(key),
      async insert(record) {
        const inserted = await store.insert(record);
        if (inserted && record.outcome.status === 'succeeded') charges += 1;
        return inserted;
      },
    },
  };
}

function mockHarness(store: MockRailStore, onClose: () => void = () => undefined): RailHarness {
  const counted = countingStore(store);
  let failNext = false;
  const rail = createMockRail({
    store: counted.store,
    declineWhen: (request) => (request.amountCents === declinedAmountCents ? declineCode : undefined),
    faults: {
      afterCharge: () => {
        if (!failNext) return;
        failNext = false;
        throw new PaymentError('rail-timeout', 'simulated: the process died after the charge');
      },
    },
  });
  return {
    rail,
    charges: counted.charges,
    unknownOutcomeAfterNextCharge() {
      failNext = true;
      return undefined;
    },
    async close() {
      onClose();
    },
  };
}

async function stripeOnFakeHarness(): Promise<RailHarness> {
  const fake: FakeStripe = await startFakeStripe({ declineAmounts: { [declinedAmountCents]: declineCode } });
  const rail = createStripeRail({
    secretKey: 'sk_test_contract',
    stripe: { host: fake.host, port: fake.port, protocol: 'http' },
    // Far beyond the test's timeout: an unknown outcome must come from the caller's abort, not the SDK.
    timeoutMs: 600_000,
  });
  return {
    rail,
    charges: () => fake.charges(),
    unknownOutcomeAfterNextCharge() {
      // The fake records the charge and never answers; the caller gives up once it has.
      const controller = new AbortController();
      void fake.failNext('hang-after-charge').then(() => controller.abort());
      return controller.signal;
    },
    close: () => fake.close(),
  };
}

const harnesses: readonly [string, () => Promise<RailHarness>][] = [
  ['mock rail, memory store', async () => mockHarness(createMemoryMockRailStore())],
  [
    'mock rail, SQLite store',
    async () => {
      const database = new Database(':memory:');
      applyMigrations(database, { 'mock-rail': mockRailMigrations });
      return mockHarness(createSqliteMockRailStore(database), () => database.close());
    },
  ],
  ['Stripe rail on the stateful fake', stripeOnFakeHarness],
];

let counter = 0;
function chargeRequest(overrides: Partial<ChargeRequest> = {}): ChargeRequest {
  counter += 1;
  const key = `urn:uuid:00000000-0000-4000-8000-${String(counter).padStart(12, '0')}`;
  return {
    idempotencyKey: key,
    invoiceId: key,
    merchantId: 'did:web:pizza.example',
    amountCents: 1_500,
    currency: 'usd',
    ...overrides,
  };
}

describe.each(harnesses)('payment rail contract: %s', (_name, start) => {
  let harness: RailHarness;
  beforeEach(async () => {
    harness = await start();
  });
  afterEach(async () => {
    await harness.close();
  });

  it('charges once and returns a payment reference', async () => {
    const outcome = await harness.rail.charge(chargeRequest());
    expect(outcome).toEqual({ status: 'succeeded', paymentRef: expect.any(String) });
    expect(outcome.status === 'succeeded' && outcome.paymentRef.length).toBeGreaterThan(0);
    expect(harness.charges()).toBe(1);
  });

  it('a retry with the same key returns the first outcome and never charges twice', async () => {
    const request = chargeRequest();
    const first = await harness.rail.charge(request);
    const second = await harness.rail.charge({ ...request });
    expect(second).toEqual(first);
    expect(harness.charges()).toBe(1);
    // A different key is a different charge.
    const other = await harness.rail.charge(chargeRequest());
    expect(other).not.toEqual(first);
    expect(harness.charges()).toBe(2);
  });

  it('concurrent charges with the same key charge once and agree', async () => {
    const request = chargeRequest();
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => harness.rail.charge(request)));
    expect(new Set(outcomes.map((outcome) => JSON.stringify(outcome))).size).toBe(1);
    expect(harness.charges()).toBe(1);
  });

  it('a decline is a value with the code and a model-actionable reason, and charges nothing', async () => {
    const request = chargeRequest({ amountCents: declinedAmountCents });
    const outcome = await harness.rail.charge(request);
    expect(outcome).toEqual({ status: 'declined', code: declineCode, reason: expect.stringContaining(declineCode) });
    expect(outcome.status === 'declined' && outcome.reason).toMatch(/nothing was charged/);
    expect(harness.charges()).toBe(0);
    // The same key replays the decline (as Stripe does): still nothing charged.
    await expect(harness.rail.charge(request)).resolves.toEqual(outcome);
    expect(harness.charges()).toBe(0);
  });

  it('the same key for a different amount or merchant is an idempotency conflict and charges nothing more', async () => {
    const request = chargeRequest();
    await harness.rail.charge(request);
    for (const changed of [{ amountCents: 1_501 }, { merchantId: 'did:web:other.example' }]) {
      const error = await harness.rail.charge({ ...request, ...changed }).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(PaymentError);
      expect((error as PaymentError).code).toBe('idempotency-conflict');
    }
    expect(harness.charges()).toBe(1);
  });

  it('an unknown outcome throws rail-timeout/rail-unavailable; a retry with the same key resolves it to the one charge', async () => {
    const request = chargeRequest();
    const signal = harness.unknownOutcomeAfterNextCharge();
    const error = await harness.rail
      .charge(request, signal === undefined ? {} : { signal })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PaymentError);
    expect((error as PaymentError).code).toMatch(/^rail-(timeout|unavailable)$/);
    expect((error as PaymentError).outcomeUnknown).toBe(true);
    // The money moved even though the caller never heard.
    expect(harness.charges()).toBe(1);
    const resolved = await harness.rail.charge(request);
    expect(resolved).toEqual({ status: 'succeeded', paymentRef: expect.any(String) });
    await expect(harness.rail.charge(request)).resolves.toEqual(resolved);
    expect(harness.charges()).toBe(1);
  });

  it('refuses a malformed request before charging: float cents, zero, another currency', async () => {
    for (const bad of [{ amountCents: 15.5 }, { amountCents: 0 }, { amountCents: -100 }, { currency: 'eur' }]) {
      const error = await harness.rail
        .charge({ ...chargeRequest(), ...bad } as ChargeRequest)
        .catch((caught: unknown) => caught);
      expect((error as PaymentError).code).toBe('invalid-request');
    }
    expect(harness.charges()).toBe(0);
  });

  it('an already-aborted call throws rail-timeout and charges nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    const error = await harness.rail.charge(chargeRequest(), { signal: controller.signal }).catch((caught) => caught);
    expect((error as PaymentError).code).toBe('rail-timeout');
    expect(harness.charges()).toBe(0);
  });
});
