/** The closed set of policy failure codes; logs and tests switch on these, never on messages. */
export const POLICY_ERROR_CODES = [
  'bundle_invalid',
  'engine_load_failed',
  'missing_builtin',
  'builtin_failed',
  'evaluation_failed',
  'non_boolean_result',
  'missing_input',
  'store_full',
  'store_failed',
  'compile_failed',
] as const;

/** One of {@link POLICY_ERROR_CODES}. */
export type PolicyErrorCode = (typeof POLICY_ERROR_CODES)[number];

/** The policy domain's one error class: a closed `code`, a message for logs, and the original `cause`. */
export class PolicyError extends Error {
  override readonly name = 'PolicyError';
  readonly code: PolicyErrorCode;

  constructor(code: PolicyErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
  }
}
