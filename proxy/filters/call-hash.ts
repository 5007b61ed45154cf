import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { ProxyError } from '../errors';

/** A call as a person approves it: the qualified tool name and exactly the arguments it runs with. */
export interface ApprovedCall {
  readonly tool: string;
  readonly arguments: Readonly<Record<string, unknown>>;
}

/**
 * The canonical bytes of a call (RFC 8785 JSON of `{"tool": …, "arguments": {…}}`): what the
 * call hash covers and what the approval window renders, so nothing is hashed that is not shown.
 * Throws `ProxyError('call-not-canonical')` for arguments JSON cannot carry (NaN, a lone surrogate).
 */
export function canonicalCall(call: ApprovedCall): string {
  let text: string | undefined;
  try {
    text = canonicalize({ tool: call.tool, arguments: call.arguments });
  } catch (error) {
    throw new ProxyError('call-not-canonical', 'the call has no canonical JSON form', { cause: error });
  }
  if (text === undefined) throw new ProxyError('call-not-canonical', 'the call has no canonical JSON form');
  return text;
}

/**
 * The call hash a `CallApproval`'s passkey assertion signs (docs/human-authority.md): base64url of
 * SHA-256 over {@link canonicalCall}. One field changed is another hash.
 */
export function callHashOf(call: ApprovedCall): string {
  return createHash('sha256').update(canonicalCall(call), 'utf8').digest('base64url');
}
