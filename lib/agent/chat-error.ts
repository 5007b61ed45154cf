/** The closed set of chat error codes: callers switch on these, never on messages. */
export const chatErrorCodes = ['unknown-session', 'closed'] as const;

/** One of {@link chatErrorCodes}. */
export type ChatErrorCode = (typeof chatErrorCodes)[number];

/**
 * The chat's one error class, thrown for requests the caller must fix (a session this process does
 * not know) and after close. Expected refusals (a turn already running) are values, not this.
 */
export class ChatError extends Error {
  override readonly name = 'ChatError';
  readonly code: ChatErrorCode;

  constructor(code: ChatErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
  }
}
