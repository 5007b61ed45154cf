import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PaymentError } from '../../lib/payments/payment-error';
import type { ChargeOutcome, ChargeRequest } from '../../lib/payments/rail';
import { createStripeRail, type StripeRailOptions, stripeIdempotencyKey } from '../../lib/payments/stripe-rail';
import { type FakeStripe, startFakeStripe } from './fake-stripe';
import { startRecordingProxy } from './stripe-mock-server';

// The Stripe rail against the stateful fake: what stripe-mock (stateless) cannot show.
const secretKey = 'sk_test_51FakeSecretKeyNeverToBeLogged';
const declinedAmountCents = 9_99;

let fake: FakeStripe;
beforeEach(async () => {
  fake = await startFakeStripe({ declineAmounts: { [declinedAmountCents]: 'insufficient_funds' } });
});
afterEach(async () => {
  await fake.close();
});

function rail(overrides: Partial<StripeRailOptions> = {}) {
  return createStripeRail({ secretKey, stripe: { host: fake.host, port: fake.port, protocol: 'http' }, ...overrides });
}

let counter = 0;
function chargeRequest(overrides: Partial<ChargeRequest> = {}): ChargeRequest {
  counter += 1;
  const key = `urn:uuid:11111111-0000-4000-8000-${String(counter).padStart(12, '0')}`;
  return {
    idempotencyKey: key,
    invoiceId: key,
    merchantId: 'did:web:pizza.example',
    amountCents: 1_500,
    currency: 'usd',
    ...overrides,
  };
}

async function failure(work: Promise<unknown>): Promise<PaymentError> {
  const caught = await work.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(caught).toBeInstanceOf(PaymentError);
  return caught as PaymentError;
}

describe('Stripe rail on the stateful fake', () => {
  it('a retried charge sends the same Idempotency-Key and charges once', async () => {
    const request = chargeRequest();
    const first = await rail().charge(request);
    // A new rail instance (as after a restart) with the same key.
    const second = await rail().charge(request);
    expect(first).toEqual({ status: 'succeeded', paymentRef: 'pi_fake_1' });
    expect(second).toEqual(first);
    expect(fake.requests.map((sent) => sent.idempotencyKey)).toEqual([
      stripeIdempotencyKey(request.idempotencyKey),
      stripeIdempotencyKey(request.idempotencyKey),
    ]);
    expect(fake.charges()).toBe(1);
  });

  it('sends a confirmed PaymentIntent with metadata binding the invoice and merchant', async () => {
    const request = chargeRequest({ amountCents: 2_345 });
    await rail().charge(request);
    expect(fake.requests[0]?.params).toMatchObject({
      amount: '2345',
      currency: 'usd',
      confirm: 'true',
      payment_method: 'pm_card_visa',
      'automatic_payment_methods[enabled]': 'true',
      'automatic_payment_methods[allow_redirects]': 'never',
      'metadata[invoice_id]': request.invoiceId,
      'metadata[merchant_id]': request.merchantId,
    });
  });

  it('an issuer decline (402 card_error) is a declined outcome with the decline code; nothing charged', async () => {
    const outcome = await rail().charge(chargeRequest({ amountCents: declinedAmountCents }));
    expect(outcome).toEqual({
      status: 'declined',
      code: 'insufficient_funds',
      reason: expect.stringMatching(/declined \(insufficient_funds\).*nothing was charged.*another card/),
    });
    const byCard = await rail({ paymentMethod: 'pm_card_chargeDeclined' }).charge(chargeRequest());
    expect(byCard).toMatchObject({ status: 'declined', code: 'generic_decline' });
    expect(fake.charges()).toBe(0);
  });

  it('another 4xx Stripe answered (an unknown PaymentMethod) is a declined outcome, not an unknown one', async () => {
    const outcome = await rail({ paymentMethod: 'pm_card_doesNotExist' }).charge(chargeRequest());
    expect(outcome).toMatchObject({ status: 'declined', code: 'resource_missing' });
    expect(fake.charges()).toBe(0);
  });

  it('a 500 is an unknown outcome (rail-unavailable); the retry with the same key then charges once', async () => {
    const request = chargeRequest();
    const fired = fake.failNext('error-500');
    const error = await failure(rail().charge(request));
    await fired;
    expect(error.code).toBe('rail-unavailable');
    expect(error.outcomeUnknown).toBe(true);
    expect(fake.charges()).toBe(0);
    await expect(rail().charge(request)).resolves.toMatchObject({ status: 'succeeded' });
    await expect(rail().charge(request)).resolves.toMatchObject({ status: 'succeeded' });
    expect(fake.charges()).toBe(1);
  });

  it('a charge slower than the timeout is rail-timeout, and the retry resolves to the first charge without charging twice', async () => {
    const request = chargeRequest();
    const fired = fake.failNext('hang-after-charge');
    const error = await failure(rail({ timeoutMs: 200 }).charge(request));
    await fired;
    expect(error.code).toBe('rail-timeout');
    expect(fake.charges()).toBe(1);
    const resolved = await rail().charge(request);
    expect(resolved).toEqual({ status: 'succeeded', paymentRef: 'pi_fake_1' });
    expect(fake.charges()).toBe(1);
  });

  it('a caller that aborts while the charge hangs gets rail-timeout; the retry resolves it', async () => {
    const request = chargeRequest();
    const controller = new AbortController();
    void fake.failNext('hang-after-charge').then(() => controller.abort());
    // The SDK's own timeout is far beyond the test's: only the abort can end this call.
    const error = await failure(rail({ timeoutMs: 600_000 }).charge(request, { signal: controller.signal }));
    expect(error.code).toBe('rail-timeout');
    await expect(rail().charge(request)).resolves.toEqual({ status: 'succeeded', paymentRef: 'pi_fake_1' });
    expect(fake.charges()).toBe(1);
  });

  it('the same key with another amount is an idempotency conflict (Stripe 400 idempotency_error)', async () => {
    const request = chargeRequest();
    await rail().charge(request);
    const error = await failure(rail().charge({ ...request, amountCents: 1_600 }));
    expect(error.code).toBe('idempotency-conflict');
    expect(fake.charges()).toBe(1);
  });

  it('an answer for another amount than asked is refused as an idempotency conflict, never a success', async () => {
    const tampering = await startRecordingProxy({ target: fake, rewrite: (answer) => ({ ...answer, amount: 1 }) });
    try {
      const error = await failure(
        createStripeRail({
          secretKey,
          stripe: { host: tampering.host, port: tampering.port, protocol: 'http' },
        }).charge(chargeRequest()),
      );
      expect(error.code).toBe('idempotency-conflict');
    } finally {
      await tampering.close();
    }
  });

  it('nobody listening is rail-unavailable (outcome unknown)', async () => {
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const { port } = closed.address() as AddressInfo;
    closed.close();
    await once(closed, 'close');
    const error = await failure(
      createStripeRail({ secretKey, stripe: { host: '127.0.0.1', port, protocol: 'http' } }).charge(chargeRequest()),
    );
    expect(error.code).toBe('rail-unavailable');
  });

  it('refuses a secret key over plain HTTP to a host that is not loopback', () => {
    expect(() => createStripeRail({ secretKey, stripe: { host: 'stripe.example', protocol: 'http' } })).toThrow(
      expect.objectContaining({ code: 'invalid-config' }),
    );
  });

  it('never puts the secret key in an error, a reason or the rail object', async () => {
    const texts: string[] = [];
    const collect = (outcome: ChargeOutcome) => texts.push(JSON.stringify(outcome));
    const collectError = (error: PaymentError) => texts.push(error.message, String(error), inspect(error));
    collect(await rail().charge(chargeRequest({ amountCents: declinedAmountCents })));
    collect(await rail({ paymentMethod: 'pm_card_doesNotExist' }).charge(chargeRequest()));
    void fake.failNext('error-500');
    collectError(await failure(rail().charge(chargeRequest())));
    const request = chargeRequest();
    await rail().charge(request);
    collectError(await failure(rail().charge({ ...request, amountCents: 1 })));
    void fake.failNext('hang-after-charge');
    collectError(await failure(rail({ timeoutMs: 200 }).charge(chargeRequest())));
    collectError(await failure(rail().charge({ ...chargeRequest(), amountCents: 1.5 })));
    texts.push(inspect(rail(), { depth: 10 }), JSON.stringify(rail()));
    expect(texts.length).toBeGreaterThanOrEqual(12);
    for (const text of texts) expect(text).not.toContain(secretKey);
  });
});
