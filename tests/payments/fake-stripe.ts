import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small stateful fake of Stripe's `POST /v1/payment_intents` over HTTP on loopback, for what
 * stripe-mock (stateless) cannot show: idempotent replay, declines, and unknown outcomes.
 * It follows Stripe's documented behaviour: form-encoded bodies; the first response for an
 * `Idempotency-Key` is saved and replayed for the same parameters; the same key with other
 * parameters is a 400 `idempotency_error`; declines are 402 `card_error`s carrying the
 * PaymentIntent, and are replayed too.
 */
export interface FakeStripe {
  readonly host: '127.0.0.1';
  readonly port: number;
  /** Every request received, in order (never the Authorization header). */
  readonly requests: readonly FakeStripeRequest[];
  /** PaymentIntents that actually succeeded: money moved. */
  charges(): number;
  /** Arms a fault for the next create request; resolves when it fires (for `hang-after-charge`, once the charge is recorded). */
  failNext(fault: FakeStripeFault): Promise<void>;
  close(): Promise<void>;
}

/**
 * - `error-500`: answers 500 `api_error` before processing (nothing charged, nothing saved: Stripe
 *   saves no idempotent result for a request that never began executing).
 * - `hang-after-charge`: processes and saves the charge, then never answers; the client sees a
 *   timeout or gives up, and a retry with the same key gets the saved result.
 */
export type FakeStripeFault = 'error-500' | 'hang-after-charge';

/** One request the fake received. */
export interface FakeStripeRequest {
  readonly method: string;
  readonly path: string;
  readonly idempotencyKey: string | undefined;
  /** The form body, flat as sent (`metadata[invoice_id]`, `automatic_payment_methods[enabled]`). */
  readonly params: Readonly<Record<string, string>>;
}

/** Options for {@link startFakeStripe}. */
export interface FakeStripeOptions {
  /** Amounts (cents) the issuer declines, with their decline code. */
  readonly declineAmounts?: Readonly<Record<number, string>>;
}

interface SavedResponse {
  readonly fingerprint: string;
  readonly status: number;
  readonly body: unknown;
}

/** Test payment methods that Stripe documents as declining, with their decline codes. */
const decliningPaymentMethods: Readonly<Record<string, string>> = {
  pm_card_chargeDeclined: 'generic_decline',
  pm_card_chargeDeclinedInsufficientFunds: 'insufficient_funds',
};

/** Test payment methods that Stripe documents as succeeding. */
const succeedingPaymentMethods: ReadonlySet<string> = new Set(['pm_card_visa', 'pm_card_mastercard']);

/** Starts the fake on a free loopback port. */
export async function startFakeStripe(options: FakeStripeOptions = {}): Promise<FakeStripe> {
  const requests: FakeStripeRequest[] = [];
  const saved = new Map<string, SavedResponse>();
  const armed: { fault: FakeStripeFault; fired: () => void }[] = [];
  const hung: ServerResponse[] = [];
  let succeeded = 0;
  let sequence = 0;

  const server = createServer((request, response) => {
    void handle(request, response);
  });

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const body = await readBody(request);
    const params = Object.fromEntries(new URLSearchParams(body));
    const idempotencyKey = header(request, 'idempotency-key');
    const path = request.url ?? '';
    requests.push({ method: request.method ?? '', path, idempotencyKey, params });

    // 1. Authentication: a test-mode secret key as a Bearer token (Stripe masks the key in its answer).
    const authorization = header(request, 'authorization') ?? '';
    if (!/^Bearer sk_test_[0-9A-Za-z_]+$/.test(authorization)) {
      return send(response, 401, stripeError('invalid_request_error', 'Invalid API Key provided: sk_test_****'));
    }
    if (request.method !== 'POST' || path !== '/v1/payment_intents') {
      return send(response, 404, stripeError('invalid_request_error', `Unrecognized request URL (${path})`));
    }

    // 2. Faults armed by the test.
    const fault = armed.shift();
    if (fault?.fault === 'error-500') {
      fault.fired();
      return send(response, 500, stripeError('api_error', 'An unknown error occurred'));
    }

    // 3. Idempotency: replay the first answer for the same parameters, refuse other parameters.
    const fingerprint = JSON.stringify(Object.entries(params).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    if (idempotencyKey !== undefined) {
      const previous = saved.get(idempotencyKey);
      if (previous !== undefined) {
        if (previous.fingerprint !== fingerprint) {
          return send(
            response,
            400,
            stripeError(
              'idempotency_error',
              `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${idempotencyKey}' if you meant to execute a different request.`,
            ),
          );
        }
        return send(response, previous.status, previous.body, { 'idempotent-replayed': 'true' });
      }
    }

    // 4. Process: validate, then decline or charge.
    const answer = process(params);
    if (idempotencyKey !== undefined && answer.status !== 400) {
      saved.set(idempotencyKey, { fingerprint, ...answer });
    }
    if (fault?.fault === 'hang-after-charge') {
      hung.push(response);
      fault.fired();
      return;
    }
    send(response, answer.status, answer.body);
  }

  function process(params: Record<string, string>): { status: number; body: unknown } {
    const amount = Number(params.amount);
    if (!Number.isSafeInteger(amount) || amount <= 0) {
      return {
        status: 400,
        body: stripeError('invalid_request_error', 'Invalid integer: amount', 'parameter_invalid_integer'),
      };
    }
    if (params.currency !== 'usd' || params.confirm !== 'true' || params.payment_method === undefined) {
      return {
        status: 400,
        body: stripeError('invalid_request_error', 'Missing or invalid parameters', 'parameter_missing'),
      };
    }
    sequence += 1;
    const intent = {
      id: `pi_fake_${sequence}`,
      object: 'payment_intent',
      amount,
      currency: params.currency,
      livemode: false,
      payment_method: params.payment_method,
      description: params.description ?? null,
      metadata: { invoice_id: params['metadata[invoice_id]'], merchant_id: params['metadata[merchant_id]'] },
    };
    const declineCode = decliningPaymentMethods[params.payment_method] ?? options.declineAmounts?.[amount];
    if (declineCode === undefined && !succeedingPaymentMethods.has(params.payment_method)) {
      return {
        status: 400,
        body: stripeError(
          'invalid_request_error',
          `No such PaymentMethod: '${params.payment_method}'`,
          'resource_missing',
        ),
      };
    }
    if (declineCode !== undefined) {
      const failure = {
        type: 'card_error',
        code: 'card_declined',
        decline_code: declineCode,
        message: 'Your card was declined.',
      };
      return {
        status: 402,
        body: {
          error: {
            ...failure,
            payment_intent: { ...intent, status: 'requires_payment_method', last_payment_error: failure },
          },
        },
      };
    }
    succeeded += 1;
    return { status: 200, body: { ...intent, status: 'succeeded', latest_charge: `ch_fake_${sequence}` } };
  }

  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    host: '127.0.0.1',
    port,
    requests,
    charges: () => succeeded,
    failNext(fault) {
      return new Promise<void>((fired) => {
        armed.push({ fault, fired });
      });
    },
    async close() {
      for (const response of hung) response.destroy();
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

function header(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function stripeError(type: string, message: string, code?: string): unknown {
  return { error: { type, message, ...(code === undefined ? {} : { code }) } };
}

function send(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  response.end(text);
}
