/** The closed set of identity error codes: callers switch on these, never on messages. */
export const identityErrorCodes = [
  'household-invalid',
  'key-file',
  'decrypt-failed',
  'issue-failed',
  'store-failed',
  'merchant-conflict',
  'bad-request',
  'unauthenticated',
  'forbidden',
  'rate-limited',
  'not-found',
  'conflict',
] as const;

/** One of {@link identityErrorCodes}. */
export type IdentityErrorCode = (typeof identityErrorCodes)[number];

/**
 * Identity's one error class: a closed `code`, a message fit for the person or model who caused
 * it, and the original `cause`. Expected refusals (a bad passkey, a wrong code) are values, not
 * this; it is thrown for faults and for requests the caller must fix.
 */
export class IdentityError extends Error {
  override readonly name = 'IdentityError';
  readonly code: IdentityErrorCode;

  constructor(code: IdentityErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
  }
}
