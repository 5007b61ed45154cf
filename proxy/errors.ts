/** The closed set of proxy error codes. */
export const proxyErrorCodes = [
  'config-invalid',
  'config-not-found',
  'invalid-name',
  'unknown-tool',
  'downstream-unavailable',
  'downstream-timeout',
  'downstream-redirect',
  'downstream-failed',
  'outcome-unknown',
  'protocol-mismatch',
  'load-failed',
  'already-admitted',
  'tokens-not-found',
  'credential-invalid',
  'credential-rejected',
  'proxy-already-running',
  // Policy engines and bundles (SPEC §4): logs and tests switch on these, never on messages.
  'bundle-invalid',
  'engine-load-failed',
  'missing-builtin',
  'builtin-failed',
  'evaluation-failed',
  'non-boolean-result',
  'missing-input',
  'store-full',
  'store-failed',
  'compile-failed',
  // A call whose arguments have no RFC 8785 form cannot be hashed, so it cannot be approved.
  'call-not-canonical',
] as const;

/** One of {@link proxyErrorCodes}. */
export type ProxyErrorCode = (typeof proxyErrorCodes)[number];

const brand = Symbol.for('extensible-mcp.ProxyError');

/**
 * The proxy's one error base class (policy engines and bundles included): a closed `code`, a
 * message written for the operator or the model, and the original `cause`. Each face translates
 * it in one place; anything that is not a ProxyError is never shown raw.
 */
export class ProxyError extends Error {
  override readonly name = 'ProxyError';
  readonly code: ProxyErrorCode;
  readonly [brand] = true;

  constructor(code: ProxyErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
  }

  /** True for a ProxyError from any copy of this module (a bundler may hold two), unlike `instanceof`. */
  static isInstance(error: unknown): error is ProxyError {
    return typeof error === 'object' && error !== null && (error as { [brand]?: unknown })[brand] === true;
  }
}
