import Stripe from 'stripe';
import { PaymentError } from './payment-error';
import {
  type ChargeOptions,
  type ChargeOutcome,
  type ChargeRequest,
  describeDecline,
  type PaymentRail,
  parseChargeRequest,
} from './rail';

/** Where the Stripe SDK sends requests; only for stripe-mock and local fakes. Default: Stripe's API over HTTPS. */
export interface StripeEndpoint {
  readonly host?: string;
  readonly port?: number;
  readonly protocol?: 'http' | 'https';
}

/** Options for {@link createStripeRail}. */
export interface StripeRailOptions {
  /** A test-mode secret key (`sk_test_…`); anything else is refused at construction. */
  readonly secretKey: string;
  /** Endpoint override (stripe-mock, a fake). Plain HTTP is allowed to loopback hosts only. */
  readonly stripe?: StripeEndpoint;
  /** The PaymentMethod to confirm with; default `pm_card_visa` (Stripe's test card). */
  readonly paymentMethod?: string;
  /** The SDK's per-request timeout; past it the outcome is unknown (`rail-timeout`). Default 20 s. */
  readonly timeoutMs?: number;
}

/** The prefix of the only keys this rail accepts: Stripe test-mode secret keys (SPEC §7). */
const testSecretKeyPrefix = 'sk_test_';
const loopbackHosts = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

/**
 * The Stripe payment rail (SPEC §7), test mode only: any key not starting `sk_test_` is refused
 * before a client exists. A charge is one confirmed PaymentIntent created with the Stripe
 * idempotency key `invoice-<key>`, so a retry with the same key (after a timeout, a crash, a
 * 5xx) returns Stripe's first answer and never charges twice. The SDK's own retries are off: the
 * retry policy is the caller's and explicit. The key is kept in a closure, never logged, and never
 * put into an error message.
 */
export function createStripeRail(options: StripeRailOptions): PaymentRail {
  // 1. Test mode only: refuse live, restricted, publishable and empty keys before anything is built.
  refuseNonTestKey(options.secretKey);
  // 2. A secret key never travels over plain HTTP off this machine.
  const endpoint = options.stripe ?? {};
  if (endpoint.protocol === 'http' && !loopbackHosts.has(endpoint.host ?? '')) {
    throw new PaymentError(
      'invalid-config',
      `the Stripe endpoint uses plain HTTP to ${endpoint.host ?? '(default host)'}: only loopback hosts may use HTTP`,
    );
  }
  const timeoutMs = options.timeoutMs ?? 20_000;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) {
    throw new PaymentError('invalid-config', `timeoutMs must be a positive integer of milliseconds (got ${timeoutMs})`);
  }
  const paymentMethod = options.paymentMethod ?? 'pm_card_visa';
  const client = new Stripe(options.secretKey, {
    maxNetworkRetries: 0,
    timeout: timeoutMs,
    telemetry: false,
    ...(endpoint.host === undefined ? {} : { host: endpoint.host }),
    ...(endpoint.port === undefined ? {} : { port: endpoint.port }),
    ...(endpoint.protocol === undefined ? {} : { protocol: endpoint.protocol }),
  });

  return {
    name: 'stripe',
    async charge(input: ChargeRequest, callOptions?: ChargeOptions): Promise<ChargeOutcome> {
      // 1. Parse at the boundary: integer cents, one currency, nothing else.
      const request = parseChargeRequest(input);
      const signal = callOptions?.signal;
      if (signal?.aborted === true) throw aborted();
      // 2. One confirmed PaymentIntent under the invoice's idempotency key.
      const creation = client.paymentIntents.create(
        {
          amount: request.amountCents,
          currency: request.currency,
          payment_method: paymentMethod,
          confirm: true,
          automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
          metadata: { invoice_id: request.invoiceId, merchant_id: request.merchantId },
          description: `Invoice ${request.invoiceId}`,
        },
        { idempotencyKey: stripeIdempotencyKey(request.idempotencyKey) },
      );
      let intent: Stripe.PaymentIntent;
      try {
        intent = await raceAbort(creation, signal);
      } catch (error) {
        // 3. A failure Stripe reported is a value; anything else leaves the outcome unknown.
        return fromStripeError(error, options.secretKey);
      }
      // 4. The answer must be for this charge: Stripe replays by key, so a mismatch means the key was reused.
      if (intent.amount !== request.amountCents || intent.currency !== request.currency) {
        throw new PaymentError(
          'idempotency-conflict',
          `Stripe answered a PaymentIntent for ${intent.amount} ${intent.currency}, not ${request.amountCents} ${request.currency}: this invoice key was used for another charge`,
        );
      }
      // 5. Map the PaymentIntent's status.
      return fromPaymentIntent(intent);
    },
  };
}

/** The idempotency key sent to Stripe for an invoice key: prefixed so it cannot collide with other uses of the account. */
export function stripeIdempotencyKey(idempotencyKey: string): string {
  return `invoice-${idempotencyKey}`;
}

/** Throws `live-key-refused` unless the key is a Stripe test-mode secret key; never echoes the key. */
function refuseNonTestKey(secretKey: string): void {
  if (/^sk_test_[0-9A-Za-z_]+$/.test(secretKey)) return;
  const kind = /^(sk|rk|pk)_(live|test)_/.exec(secretKey)?.[0];
  const described =
    secretKey.length === 0 ? 'an empty key' : kind === undefined ? 'a key of unknown form' : `a ${kind}… key`;
  throw new PaymentError(
    'live-key-refused',
    `the Stripe rail runs in test mode only and needs a secret test key starting ${testSecretKeyPrefix}; it was given ${described}, which it refuses before making any request`,
  );
}

/** Races the SDK call against the caller's abort; an abort leaves the charge's outcome unknown. */
async function raceAbort<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return work;
  let onAbort: (() => void) | undefined;
  const abortion = new Promise<never>((_, reject) => {
    onAbort = () => reject(aborted());
    signal.addEventListener('abort', onAbort, { once: true });
  });
  // The SDK call keeps running to its own timeout; its late settlement must not go unhandled.
  work.catch(() => undefined);
  try {
    return await Promise.race([work, abortion]);
  } finally {
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
  }
}

function aborted(): PaymentError {
  return new PaymentError('rail-timeout', 'the caller stopped waiting for Stripe: the charge outcome is unknown');
}

/** A PaymentIntent the create call returned, as an outcome. Unexpected states are unknown outcomes. */
function fromPaymentIntent(intent: Stripe.PaymentIntent): ChargeOutcome {
  switch (intent.status) {
    case 'succeeded':
      return { status: 'succeeded', paymentRef: intent.id };
    case 'requires_payment_method': {
      const failure = intent.last_payment_error;
      const code = failure?.decline_code ?? failure?.code ?? 'payment_failed';
      return { status: 'declined', code, reason: describeDecline(code) };
    }
    case 'requires_action':
      return {
        status: 'declined',
        code: 'authentication_required',
        reason:
          'the card needs the cardholder to authenticate (3-D Secure), which cannot happen here: nothing was charged; ask the parent for another card',
      };
    case 'canceled':
      return {
        status: 'declined',
        code: 'payment_intent_canceled',
        reason: 'the payment was canceled at Stripe: nothing was charged; try again with a new invoice',
      };
    default:
      // processing, requires_capture, requires_confirmation: money may or may not move.
      throw new PaymentError(
        'rail-unavailable',
        `Stripe left the payment ${intent.id} in state ${intent.status}: its outcome is not known yet; retry later`,
      );
  }
}

/**
 * Translates whatever the create call threw (the one translator at this boundary): a card error
 * or other 4xx Stripe answered becomes a `declined` value; a reused key is
 * `idempotency-conflict`; a connection failure, timeout, 409, 429 or 5xx leaves the outcome
 * unknown and throws.
 */
function fromStripeError(error: unknown, secretKey: string): ChargeOutcome {
  if (error instanceof PaymentError) throw error;
  if (!(error instanceof Stripe.errors.StripeError)) {
    throw new PaymentError('rail-unavailable', 'the Stripe call failed unexpectedly: the charge outcome is unknown', {
      cause: error,
    });
  }
  const said = redact(error.message, secretKey);
  // 1. No answer at all: the request may or may not have reached Stripe.
  if (error instanceof Stripe.errors.StripeConnectionError) {
    const timedOut = isTimeout(error.detail);
    throw new PaymentError(
      timedOut ? 'rail-timeout' : 'rail-unavailable',
      `${timedOut ? 'Stripe did not answer in time' : 'Stripe could not be reached'}: the charge outcome is unknown; retry with the same invoice`,
      { cause: error },
    );
  }
  const statusCode = error.statusCode;
  // 2. 5xx, 409 (a request with this key still in flight) and 429 (not processed yet): unknown, retry later.
  if (statusCode === undefined || statusCode >= 500 || statusCode === 409 || statusCode === 429) {
    throw new PaymentError(
      'rail-unavailable',
      `Stripe answered ${statusCode ?? 'without a status'} (${said}): the charge outcome is unknown; retry with the same invoice`,
      { cause: error },
    );
  }
  // 3. The key was used before with other parameters: refuse, nothing new was charged.
  if (error instanceof Stripe.errors.StripeIdempotencyError) {
    throw new PaymentError(
      'idempotency-conflict',
      `this invoice was already sent to Stripe with different parameters (${said}): nothing new was charged`,
      { cause: error },
    );
  }
  // 4. A decline the card issuer or Stripe reported.
  if (error instanceof Stripe.errors.StripeCardError) {
    const code = error.decline_code ?? error.code ?? 'card_declined';
    return { status: 'declined', code, reason: describeDecline(code) };
  }
  // 5. Any other 4xx Stripe answered: a refusal it reported, so nothing was charged.
  const code = error.code ?? error.rawType ?? 'request_refused';
  return {
    status: 'declined',
    code,
    reason: `the payment service refused the charge (${code}: ${said}): nothing was charged; the household's payment setup may need an operator`,
  };
}

/** True when the SDK's connection error was its own timeout. */
function isTimeout(detail: unknown): boolean {
  return (
    typeof detail === 'object' &&
    detail !== null &&
    'code' in detail &&
    detail.code === Stripe.HttpClient.TIMEOUT_ERROR_CODE
  );
}

/** Removes the secret key from text that came from the network, in case a server echoed it. */
function redact(text: string, secretKey: string): string {
  return text.split(secretKey).join('sk_test_[redacted]');
}
