import { createHash, randomBytes } from 'node:crypto';
import type { DiscoveryScope, Principal } from './types';

/** The prefix of a discovery handle: `dh_` and 22 base64url characters (128 random bits). */
const handlePrefix = 'dh_';
const handlePattern = /^dh_[A-Za-z0-9_-]{22}$/;

/** A fresh discovery handle (docs/protocol.md): opaque, 128 bits from the CSPRNG, encoding nothing. */
export function mintHandle(): string {
  return `${handlePrefix}${randomBytes(16).toString('base64url')}`;
}

/** Whether `value` has the shape of a handle; anything else is never looked up. */
export function isHandle(value: string): boolean {
  return handlePattern.test(value);
}

/**
 * The store key of a scope: SHA-256 over the principal and the carrier, so a handle or session id
 * presented by another principal names another (empty) scope, and the store never holds a raw id.
 * `undefined` for a handle scope that carries no (well-formed) handle: nothing was discovered in it.
 */
export function scopeKey(principal: Principal, scope: DiscoveryScope): string | undefined {
  const carrier = scope.kind === 'session' ? scope.id : scope.handle;
  if (carrier === undefined || (scope.kind === 'handle' && !isHandle(carrier))) return undefined;
  return createHash('sha256')
    .update(['extensible-mcp/scope/v1', principal.id, scope.kind, carrier].join('\u0000'))
    .digest('base64url');
}

/** What events and logs name a scope by: the first 16 characters of its key, or `none`. */
export function scopeDigest(principal: Principal, scope: DiscoveryScope): string {
  return scopeKey(principal, scope)?.slice(0, 16) ?? 'none';
}
