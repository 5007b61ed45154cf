import { ProxyError } from '../errors';

/**
 * Credential wording the model sees, made in one place. None of it ever includes a token: the
 * callers pass the server name and numbers only.
 */

/** Whole minutes between `since` and `now`, never negative. */
export function minutesSince(since: number, now: number): number {
  return Math.max(0, Math.floor((now - since) / 60_000));
}

/**
 * The error for a downstream that refused the token it was sent (HTTP 401/403 or an MCP error
 * saying so): names the server and how long the token has been unchanged, and tells the model
 * to have the user fix the tokens file, never to ask for the token in chat (SPEC §3.9).
 */
export function credentialRejected(options: {
  server: string;
  status: number | undefined;
  unchangedMinutes: number;
}): ProxyError {
  const how = options.status === undefined ? 'rejected its token' : `rejected its token (HTTP ${options.status})`;
  const minutes = options.unchangedMinutes === 1 ? '1 minute' : `${options.unchangedMinutes} minutes`;
  return new ProxyError(
    'credential-rejected',
    `Server "${options.server}" ${how}. The token for "${options.server}" has been unchanged for at least ${minutes}. Ask the user to update the "${options.server}" line in the extensible-mcp tokens file, then retry. Never ask the user to paste a token in chat.`,
  );
}

/**
 * The error for a token the proxy will not send: characters that cannot go into an HTTP header
 * (a look-alike letter, a space, a line break). Refusing beats letting the HTTP stack throw an
 * error that quotes the header value.
 */
export function credentialInvalid(server: string): ProxyError {
  return new ProxyError(
    'credential-invalid',
    `The token for "${server}" in the tokens file contains characters that cannot be sent in an HTTP header (for example a look-alike letter, a space or a line break), so it was not sent. Ask the user to re-enter it in the tokens file. Never ask the user to paste a token in chat.`,
  );
}

/** A bearer token the proxy is willing to send: visible ASCII only, no spaces. */
export function isSendableToken(value: string): boolean {
  return /^[\x21-\x7e]+$/.test(value);
}

const authFailure = /\b(unauthori[sz]ed|forbidden|invalid[ _-]?token|expired[ _-]?token|bad credentials)\b/i;

/** Whether an MCP error message from a downstream says its credential was refused. */
export function mentionsAuthFailure(message: string): boolean {
  return authFailure.test(message);
}
