/** A WebAuthn failure in words (the browser's own messages are written for developers). */
export function passkeyProblem(error: unknown): string {
  if (error instanceof Error && error.name === 'NotAllowedError') {
    return 'The passkey prompt was closed or timed out. Try again when you are ready.';
  }
  return error instanceof Error ? `The passkey did not work: ${error.message}` : 'The passkey did not work.';
}
