import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseTokens } from '../credentials/tokens-file';
import { ProxyError } from '../errors';
import type { Principal } from '../gateway/types';

/** One inbound client's bearer token: who presents `token` is the principal `token:<name>` (SPEC §3.5). */
export interface InboundToken {
  readonly name: string;
  readonly token: string;
}

const namePattern = /^[A-Za-z0-9._-]{1,64}$/;
/** Shorter tokens are refused: an inbound token is the only thing between the port and the tools. */
const minimumTokenLength = 16;

/** The principal of a face that has no tokens: everyone who reaches it is the same one. */
export const anonymousPrincipal: Principal = { id: 'anonymous' };

/**
 * Checks a list of inbound tokens: names unique and plain, tokens long enough and distinct. A bad
 * entry is an error naming it (never its token), so a typo never runs an endpoint half-protected.
 */
export function checkInboundTokens(tokens: readonly InboundToken[], source: string): readonly InboundToken[] {
  if (tokens.length === 0) throw new ProxyError('config-invalid', `${source}: no inbound tokens (name=token lines).`);
  const names = new Set<string>();
  const values = new Set<string>();
  for (const { name, token } of tokens) {
    if (!namePattern.test(name)) {
      throw new ProxyError(
        'config-invalid',
        `${source}: token name "${name.slice(0, 64)}" must be 1-64 of A-Z a-z 0-9 . _ -.`,
      );
    }
    if (names.has(name)) throw new ProxyError('config-invalid', `${source}: the token name "${name}" appears twice.`);
    if (token.length < minimumTokenLength || /\s/.test(token)) {
      throw new ProxyError(
        'config-invalid',
        `${source}: the token of "${name}" must be at least ${minimumTokenLength} characters, without spaces.`,
      );
    }
    if (values.has(token)) throw new ProxyError('config-invalid', `${source}: two names share one token ("${name}").`);
    names.add(name);
    values.add(token);
  }
  return tokens;
}

/** Reads `--http-tokens FILE` (`name=token` lines, `#` comments, quotes stripped), checked as above. */
export function readInboundTokens(path: string): readonly InboundToken[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ProxyError('config-invalid', `${path}: cannot read the inbound tokens file.`, { cause: error });
  }
  const parsed = parseTokens(text);
  if (parsed.malformedLines.length > 0) {
    throw new ProxyError(
      'config-invalid',
      `${path}: malformed lines ${parsed.malformedLines.join(', ')} (expected name=token).`,
    );
  }
  return checkInboundTokens(
    [...parsed.tokens].map(([name, token]) => ({ name, token })),
    path,
  );
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * The principal behind a request's `Authorization: Bearer …`, for one face's tokens: `anonymous`
 * when the face has none, `token:<name>` for a match, `undefined` (refuse) otherwise. Every token
 * is compared, in constant time over equal-length digests, so the answer's timing tells nothing
 * about which one came close or whether any did. The tokens' digests are taken once, here; each
 * request digests only what it presents.
 */
export function inboundPrincipals(
  tokens: readonly InboundToken[] | undefined,
): (authorization: string | null) => Principal | undefined {
  if (tokens === undefined) return () => anonymousPrincipal;
  const known = tokens.map(({ name, token }) => ({ name, digest: digest(token) }));
  return function inboundPrincipal(authorization) {
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization ?? '');
    const given = digest(match?.[1] ?? '');
    let found: string | undefined;
    for (const { name, digest: expected } of known) {
      if (timingSafeEqual(given, expected) && match !== null) found = name;
    }
    return found === undefined ? undefined : { id: `token:${found}` };
  };
}
