import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

/** A definition's canonical JSON and its hash (docs/pinning.md). */
export interface PinnedForm {
  /** RFC 8785 canonical JSON of the definition. */
  readonly canonical: string;
  /** SHA-256 of {@link PinnedForm.canonical}, lowercase hex. */
  readonly hash: string;
}

/**
 * The form a tool definition is pinned in: the raw object as the server listed it, in canonical
 * JSON (so key order and number spelling never count as a change), hashed with SHA-256. Throws
 * on a value JSON cannot hold (a cycle); a listing never carries one.
 */
export function pinDefinition(definition: unknown): PinnedForm {
  const canonical = canonicalize(definition);
  if (canonical === undefined) throw new TypeError('a tool definition must be a JSON value');
  return { canonical, hash: createHash('sha256').update(canonical, 'utf8').digest('hex') };
}
