import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

/** `prev_hash` of row 1: a fixed value no SHA-256 of real row bytes is expected to equal. */
export const genesisHash = '0'.repeat(64);

/** One row of the audit chain as it is hashed: its id, the previous row's hash, and the event. */
export interface AuditRowContent {
  readonly id: number;
  readonly prevHash: string;
  /** The event as a JSON value (parsed from, or about to become, the row's canonical bytes). */
  readonly event: unknown;
}

/**
 * The canonical bytes of a JSON value (RFC 8785, JCS): what the audit table stores for an event
 * and what every hash covers, so a verifier in any language recomputes the same bytes. Throws on
 * values JSON cannot carry (NaN, Infinity, a lone surrogate, a cycle).
 */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new Error('the value has no JSON representation');
  return text;
}

/**
 * SHA-256 (hex) of a row's canonical bytes `{"event":…,"id":…,"prevHash":"…"}`: the row's `hash`,
 * and the next row's `prev_hash`. Editing, moving or dropping a row changes it.
 */
export function hashAuditRow(row: AuditRowContent): string {
  return createHash('sha256')
    .update(canonicalJson({ id: row.id, prevHash: row.prevHash, event: row.event }), 'utf8')
    .digest('hex');
}
