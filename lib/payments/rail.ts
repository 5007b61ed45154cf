import { z } from 'zod';
import { PaymentError } from './payment-error';

/** One charge, as settlement asks the rail for it (SPEC §7). Integer cents, one currency. */
export interface ChargeRequest {
  /** The invoice jti: the rail's idempotency key. The same key always means the same charge. */
  readonly idempotencyKey: string;
  readonly invoiceId: string;
  readonly merchantId: string;
  /** Positive integer cents; never a float. */
  readonly amountCents: number;
  readonly currency: 'usd';
}

/**
 * What the rail answered. `declined` means the rail REPORTED a failure (a card decline, a 4xx it
 * answered): nothing was charged, and `reason` tells a model what to do next. An unknown outcome
 * is never a value: it is a thrown `PaymentError` (see {@link PaymentRail.charge}).
 */
export type ChargeOutcome =
  | { readonly status: 'succeeded'; readonly paymentRef: string }
  | { readonly status: 'declined'; readonly reason: string; readonly code: string };

/** Per-call options of {@link PaymentRail.charge}. */
export interface ChargeOptions {
  /** Aborting gives up waiting: the charge may still happen, so it throws `PaymentError('rail-timeout')`. */
  readonly signal?: AbortSignal;
}

/** A payment rail: the mock (default, no network) or Stripe (test mode only). SPEC §7. */
export interface PaymentRail {
  readonly name: 'mock' | 'stripe';
  /** Idempotent per idempotencyKey: a retry with the same key returns the first outcome and never charges twice.
   *  Throws PaymentError('rail-unavailable' | 'rail-timeout') when the outcome is UNKNOWN (network error, timeout, 5xx, crash) — the caller then treats the payment as in doubt and resolves it later by calling charge() again with the same key.
   *  Throws PaymentError('idempotency-conflict') when the key is known with another amount, merchant, invoice or currency,
   *  and PaymentError('invalid-request') for a malformed request; neither charges anything. */
  charge(request: ChargeRequest, options?: ChargeOptions): Promise<ChargeOutcome>;
}

/** The boundary schema of a {@link ChargeRequest}: closed, integer cents, one currency. */
export const chargeRequestSchema = z.strictObject({
  idempotencyKey: z.string().min(1).max(200),
  invoiceId: z.string().min(1).max(500),
  merchantId: z.string().min(1).max(500),
  amountCents: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  currency: z.literal('usd'),
});

/**
 * Parses a charge request at the rail's boundary; both rails call it before anything else, so a
 * float amount or another currency never reaches a store or the network. Throws
 * `PaymentError('invalid-request')` naming the fields at fault.
 */
export function parseChargeRequest(request: unknown): ChargeRequest {
  const parsed = chargeRequestSchema.safeParse(request);
  if (!parsed.success) {
    const fields = parsed.error.issues.map((issue) => issue.path.join('.') || '(request)').join(', ');
    throw new PaymentError('invalid-request', `the charge request is malformed (${fields}); nothing was charged`, {
      cause: parsed.error,
    });
  }
  return parsed.data;
}

/**
 * The model-actionable reason for a decline code, shared by both rails so a model reads the same
 * advice whichever rail is configured. Says plainly that nothing was charged.
 */
export function describeDecline(code: string): string {
  return `the card was declined (${code}): nothing was charged; ask the parent for another card or try again later`;
}
