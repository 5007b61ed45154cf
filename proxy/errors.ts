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
  'load-failed',
  'tokens-not-found',
  'credential-invalid',
  'credential-rejected',
  'proxy-already-running',
] as const;

/** One of {@link proxyErrorCodes}. */
export type ProxyErrorCode = (typeof proxyErrorCodes)[number];

/** The proxy's error base class: a closed `code`, a message safe to show, and the original `cause`. */
export class ProxyError extends Error {
  override readonly name = 'ProxyError';
  readonly code: ProxyErrorCode;

  constructor(code: ProxyErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}
