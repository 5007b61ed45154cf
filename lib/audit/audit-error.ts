/** The closed set of unexpected faults of the audit module (expected refusals are values). */
export const auditErrorCodes = [
  'witness-unreachable',
  'witness-damaged',
  'witness-config',
  'append-contended',
  'append-unanswered',
] as const;

/** One of {@link auditErrorCodes}. */
export type AuditErrorCode = (typeof auditErrorCodes)[number];

/**
 * The audit module's one error class: a witness that cannot be reached, one whose answer is not
 * what a witness answers, or a witness configured wrongly; or an append batch that other writers
 * kept overtaking, or that the database left unanswered. The `code` says which; `cause` is kept.
 */
export class AuditError extends Error {
  override readonly name = 'AuditError';
  readonly code: AuditErrorCode;

  constructor(code: AuditErrorCode, message: string, options?: { readonly cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
  }
}
