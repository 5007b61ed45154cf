/**
 * The closed set of payment error codes: callers switch on these, never on messages.
 * - `rail-unavailable`, `rail-timeout`: the outcome is UNKNOWN (network error, 5xx, timeout,
 *   abort, crash). The payment is in doubt; resolve it by charging again with the same key.
 * - `idempotency-conflict`: the key was already used for a different charge; nothing new was charged.
 * - `live-key-refused`: a Stripe key that is not a test-mode secret key (SPEC §7: test mode only).
 * - `invalid-config`: the rail was configured in a way it refuses (e.g. a secret key over plain
 *   HTTP to a host that is not loopback).
 * - `invalid-request`: the charge request itself is malformed (not a positive integer amount,
 *   another currency); nothing was sent.
 */
export const paymentErrorCodes = [
  'rail-unavailable',
  'rail-timeout',
  'idempotency-conflict',
  'live-key-refused',
  'invalid-config',
  'invalid-request',
] as const;

/** One of {@link paymentErrorCodes}. */
export type PaymentErrorCode = (typeof paymentErrorCodes)[number];

/**
 * Payments' one error class: a closed `code`, a message fit for the operator or model, and the
 * original `cause`. A failure the rail reports (a decline, a 4xx) is a value (`ChargeOutcome`),
 * not this. Messages never contain a secret key.
 */
export class PaymentError extends Error {
  override readonly name = 'PaymentError';
  readonly code: PaymentErrorCode;

  constructor(code: PaymentErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
  }

  /** True for the codes that leave the payment in doubt: the caller must resolve it by retrying the same key. */
  get outcomeUnknown(): boolean {
    return this.code === 'rail-unavailable' || this.code === 'rail-timeout';
  }
}
