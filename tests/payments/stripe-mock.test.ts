import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PaymentError } from '../../lib/payments/payment-error';
import type { ChargeRequest } from '../../lib/payments/rail';
import { createStripeRail, stripeIdempotencyKey } from '../../lib/payments/stripe-rail';
import {
  type RecordingProxy,
  type StripeMockServer,
  startRecordingProxy,
  startStripeMock,
  stripeMockInstalled,
} from './stripe-mock-server';

// The rail's real SDK calls against Stripe's own API mock, which validates every request
// against Stripe's published OpenAPI. Under CI the binary must exist (`.ci/run` builds it):
// a missing binary fails the run rather than silently skipping Stripe coverage.
const installed = stripeMockInstalled();
const required = process.env.CI === 'true';

const secretKey = 'sk_test_stripemock';

function chargeRequest(key: string): ChargeRequest {
  return {
    idempotencyKey: key,
    invoiceId: key,
    merchantId: 'did:web:pizza.example',
    amountCents: 1_500,
    currency: 'usd',
  };
}

describe.runIf(installed || required)('Stripe rail against stripe-mock (OpenAPI-validated)', () => {
  let stripeMock: StripeMockServer;
  // stripe-mock answers every PaymentIntent with one fixture in `requires_payment_method`; this
  // proxy marks its (validated) answer `succeeded`, as Stripe answers a confirmed pm_card_visa.
  let confirmed: RecordingProxy;
  // This one passes stripe-mock's answers through untouched.
  let raw: RecordingProxy;

  beforeAll(async () => {
    if (!installed) {
      throw new Error('stripe-mock is not installed: run `bash scripts/stripe-mock.sh` (CI must build it)');
    }
    stripeMock = await startStripeMock();
    confirmed = await startRecordingProxy({
      target: stripeMock,
      rewrite: (answer) => ({ ...answer, status: 'succeeded', last_payment_error: null, next_action: null }),
    });
    raw = await startRecordingProxy({ target: stripeMock });
  });
  afterAll(async () => {
    await confirmed?.close();
    await raw?.close();
    await stripeMock?.close();
  });

  function railVia(proxy: RecordingProxy) {
    return createStripeRail({ secretKey, stripe: { host: proxy.host, port: proxy.port, protocol: 'http' } });
  }

  it('a charge is one valid POST /v1/payment_intents carrying the invoice idempotency key, and succeeds with a paymentRef', async () => {
    const before = confirmed.exchanges.length;
    const key = 'urn:uuid:6f1c1f4e-2f63-4b8e-9a59-0d1d1c6f0a01';
    const outcome = await railVia(confirmed).charge(chargeRequest(key));

    expect(outcome).toEqual({ status: 'succeeded', paymentRef: expect.stringMatching(/^pi_/) });
    const sent = confirmed.exchanges.slice(before);
    expect(sent).toHaveLength(1);
    const [exchange] = sent;
    // stripe-mock validated the request against the OpenAPI spec (it answers 400 otherwise).
    expect(exchange?.status, exchange?.responseBody).toBe(200);
    expect(exchange?.method).toBe('POST');
    expect(exchange?.path).toBe('/v1/payment_intents');
    expect(exchange?.headers['idempotency-key']).toBe(stripeIdempotencyKey(key));
    expect(exchange?.headers['stripe-version']).toBe(Stripe.API_VERSION);
    const params = new URLSearchParams(exchange?.body);
    expect(Object.fromEntries(params)).toMatchObject({
      amount: '1500',
      currency: 'usd',
      confirm: 'true',
      payment_method: 'pm_card_visa',
      'metadata[invoice_id]': key,
      'metadata[merchant_id]': 'did:web:pizza.example',
    });
  });

  it('a retried charge sends the same Idempotency-Key, both requests valid', async () => {
    const before = confirmed.exchanges.length;
    const rail = railVia(confirmed);
    const key = 'urn:uuid:6f1c1f4e-2f63-4b8e-9a59-0d1d1c6f0a02';
    await rail.charge(chargeRequest(key));
    await rail.charge(chargeRequest(key));
    const sent = confirmed.exchanges.slice(before);
    expect(sent.map((exchange) => exchange.status)).toEqual([200, 200]);
    expect(sent.map((exchange) => exchange.headers['idempotency-key'])).toEqual([
      stripeIdempotencyKey(key),
      stripeIdempotencyKey(key),
    ]);
    expect(sent[0]?.body).toBe(sent[1]?.body);
  });

  it("maps stripe-mock's untouched PaymentIntent (requires_payment_method) to a decline, never a success", async () => {
    const outcome = await railVia(raw).charge(chargeRequest('urn:uuid:6f1c1f4e-2f63-4b8e-9a59-0d1d1c6f0a03'));
    expect(outcome).toMatchObject({ status: 'declined', reason: expect.stringMatching(/nothing was charged/) });
    expect(raw.exchanges.at(-1)?.status).toBe(200);
  });

  it('stripe-mock really validates: a request outside the OpenAPI spec is refused (so the 200s above mean something)', async () => {
    const client = new Stripe(secretKey, { host: raw.host, port: raw.port, protocol: 'http', maxNetworkRetries: 0 });
    const error = await client.paymentIntents
      .create({ amount: 1_500, currency: 'usd', not_a_stripe_parameter: 'x' } as Stripe.PaymentIntentCreateParams)
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    expect(raw.exchanges.at(-1)?.status).toBe(400);
  });

  it('a live-looking, restricted, publishable or empty key is refused before any request', async () => {
    const before = confirmed.exchanges.length + raw.exchanges.length;
    for (const key of [
      'sk_live_51Habc',
      'rk_live_51Habc',
      'rk_test_51Habc',
      'pk_test_51Habc',
      'sk_test_',
      '',
      ' sk_test_x',
    ]) {
      let caught: unknown;
      try {
        createStripeRail({ secretKey: key, stripe: { host: confirmed.host, port: confirmed.port, protocol: 'http' } });
      } catch (error) {
        caught = error;
      }
      expect(caught, key).toBeInstanceOf(PaymentError);
      expect((caught as PaymentError).code).toBe('live-key-refused');
      expect((caught as PaymentError).message).toMatch(/test mode only.*sk_test_/);
      if (key.length > 8) expect((caught as PaymentError).message).not.toContain(key);
    }
    expect(confirmed.exchanges.length + raw.exchanges.length).toBe(before);
  });
});
