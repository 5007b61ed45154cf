import { ProxyError } from '../errors';

/** A credential to present on one request. */
export interface PresentedCredential {
  /** Headers to add (today only `Authorization: Bearer …`). */
  readonly headers: Readonly<Record<string, string>>;
  /** Epoch ms since when this exact value has been in place, at least (for the 401/403 message). */
  readonly unchangedSince: number;
}

/**
 * The one way credentials reach a downstream: asked per request with the server name and the
 * exact URL being fetched; `undefined` means connect anonymously. Implementations enforce URL
 * binding (SPEC §3.9) and may throw a `ProxyError` to refuse the request outright.
 */
export type CredentialLookup = (request: CredentialRequest) => PresentedCredential | undefined;

/** What a credential lookup is asked: which server, the exact URL, and the URL the operator admitted it at. */
export interface CredentialRequest {
  readonly serverName: string;
  readonly url: string;
  /** The URL the operator configured for this name (config file or `add-server`), as the gateway records it. */
  readonly configuredUrl: string | undefined;
}

/** A `fetch` as the MCP SDK's HTTP transport calls it. */
export type FetchLike = (input: string | URL, init?: RequestInit) => Promise<Response>;

/** Options of {@link credentialedFetch}. */
export interface CredentialedFetchOptions {
  /** The underlying fetch; it must never follow redirects (`fetchWithoutRedirects`). */
  readonly fetch: FetchLike;
  /** The credential for this request's URL, or `undefined`. Called on every request. */
  readonly credential: (url: string) => PresentedCredential | undefined;
  /** Builds the error thrown when a request that carried a credential is answered 401 or 403. */
  readonly onRejected: (status: number, credential: PresentedCredential) => Error;
  /** Told what the latest request carried, so MCP-level auth errors can be attributed. */
  readonly onPresented?: (credential: PresentedCredential | undefined) => void;
}

function urlOf(input: string | URL | Request): string {
  if (typeof input === 'string') return input;
  return input instanceof URL ? input.href : input.url;
}

/**
 * `fetch` for a credentialed downstream. The header is computed per request, not per
 * connection, so a rotated token is used by the next request of the long-lived Streamable HTTP
 * session without a reconnect. Any `Authorization` the caller set is dropped: only the lookup
 * decides. Redirects are left to `options.fetch`, which must refuse them.
 */
export function credentialedFetch(options: CredentialedFetchOptions): FetchLike {
  return async function credentialed(input, init) {
    const credential = options.credential(urlOf(input));
    options.onPresented?.(credential);
    const headers = new Headers(init?.headers);
    headers.delete('authorization');
    for (const [name, value] of Object.entries(credential?.headers ?? {})) headers.set(name, value);
    let response: Response;
    try {
      response = await options.fetch(input, { ...init, headers });
    } catch (error) {
      // A refused redirect names its target, a network error may quote the URL: the token the
      // server was just sent may be in either, so it is removed at the source.
      throw redactError(error, secretsOf(credential));
    }
    if (credential && (response.status === 401 || response.status === 403)) {
      // The body may quote the request; it is dropped, never shown.
      await response.body?.cancel().catch(() => undefined);
      throw options.onRejected(response.status, credential);
    }
    return response;
  };
}

/** The strings a credential reveals: its header values and the bare token of a `Bearer` header. */
export function secretsOf(credential: PresentedCredential | undefined): string[] {
  return Object.values(credential?.headers ?? {})
    .flatMap((value) => [value, value.replace(/^Bearer\s+/i, '')])
    .filter((secret) => secret.length >= 4);
}

/** What replaces a secret, in any of its forms. */
const redactedMarker = '[redacted]';

/**
 * What may sit between two characters of an echoed secret: white space (a "spaced" echo, a
 * base64 body wrapped at 76 columns) and the invisible characters that split a string without
 * showing (soft hyphen, zero-width space/joiners, word joiner, byte-order mark).
 */
const gap = '[\\s\\u00ad\\u200b-\\u200d\\u2060\\ufeff]*';

/** Encoded forms are only looked for when at least this long: shorter ones would hit ordinary words. */
const minimumEncodedLength = 8;

/** How many compiled secret sets {@link redactSecrets} keeps, so a redactor is not rebuilt per result. */
const maxCachedPatterns = 32;
const patternCache = new Map<string, RegExp>();

function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
}

/**
 * One character of a secret as it may appear in text: itself (the pattern is case-insensitive,
 * so an upper-cased echo matches), percent-encoded once or twice, as a JSON/JavaScript `\u`
 * escape, as an HTML character reference, as its fullwidth look-alike, and for a space as the
 * `+` of form encoding.
 */
function characterPattern(character: string): string {
  const code = character.codePointAt(0) ?? 0;
  const forms = [escapeRegExp(character)];
  if (code < 0x80) {
    const hex = code.toString(16).padStart(2, '0');
    forms.push(`%(?:25)?${hex}`, `\\\\u00${hex}`, `&#(?:x0*${hex}|0*${code});`);
    if (character === '"' || character === '\\' || character === '/') forms.push(`\\\\${escapeRegExp(character)}`);
    if (character === ' ') forms.push('\\+');
    if (code > 0x20 && code < 0x7f) forms.push(String.fromCodePoint(code + 0xfee0));
  }
  return forms.length === 1 ? (forms[0] ?? '') : `(?:${forms.join('|')})`;
}

/**
 * The base64 of `bytes` wherever it may sit in a longer base64 text: for each of the three byte
 * alignments, only the characters that depend on `bytes` alone (the edge characters mix in the
 * neighbouring bytes, so they are left out), and the whole encoding of `bytes` alone with its
 * last character and padding. Standard and URL-safe alphabets.
 */
function base64Fragments(bytes: Buffer): string[] {
  const fragments: string[] = [bytes.toString('base64'), bytes.toString('base64url')];
  for (let offset = 0; offset < 3; offset += 1) {
    const padded = Buffer.concat([Buffer.alloc(offset), bytes]);
    const start = Math.ceil((8 * offset) / 6);
    const end = Math.floor((8 * padded.length) / 6);
    const standard = padded.toString('base64').slice(start, end);
    fragments.push(standard, standard.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return fragments;
}

/** Every form of `secret` that is redacted: the secret itself and its common encodings. */
function formsOf(secret: string): string[] {
  const bytes = Buffer.from(secret, 'utf8');
  const encoded = [...base64Fragments(bytes), bytes.toString('hex')].filter(
    (form) => form.length >= minimumEncodedLength,
  );
  return [secret, ...new Set(encoded)];
}

/** One case-insensitive pattern matching every form of every secret, longest first. */
function patternOf(secrets: readonly string[]): RegExp {
  const key = secrets.join('\u0000');
  const cached = patternCache.get(key);
  if (cached) return cached;
  const forms = [...new Set(secrets.flatMap(formsOf))].sort((a, b) => b.length - a.length);
  const pattern = new RegExp(forms.map((form) => [...form].map(characterPattern).join(gap)).join('|'), 'gi');
  patternCache.set(key, pattern);
  for (const stale of [...patternCache.keys()].slice(0, -maxCachedPatterns)) patternCache.delete(stale);
  return pattern;
}

/**
 * Replaces every occurrence of a secret in every string of a JSON-like value (a tool result, a
 * tool definition, an error text) with `[redacted]`, in case a server echoes the request back:
 * a debug tool, a reflected header, an error page quoting the request, a redirect target. An
 * exact match is not enough, since the echo may be encoded: upper- or lower-cased, base64 or
 * base64url (at any alignment inside a longer base64 text), hex, percent-encoded, JSON- or
 * HTML-escaped, in fullwidth characters, or spaced out; all of those are removed too. Longer
 * forms go first, so a `Bearer x` header is removed whole rather than leaving its prefix behind.
 */
export function redactSecrets<T>(value: T, secrets: readonly string[]): T {
  if (secrets.length === 0) return value;
  const pattern = patternOf(secrets);
  const redact = (item: unknown): unknown => {
    if (typeof item === 'string') return item.replace(pattern, redactedMarker);
    if (Array.isArray(item)) return item.map(redact);
    if (item !== null && typeof item === 'object') {
      return Object.fromEntries(Object.entries(item).map(([key, entry]) => [redact(key), redact(entry)]));
    }
    return item;
  };
  return redact(value) as T;
}

/**
 * `error` with every secret removed from its message. A `ProxyError` keeps its code; the cause
 * of a changed error is dropped, since it may quote the secret too. An error with nothing to
 * redact is returned as is.
 */
export function redactError(error: unknown, secrets: readonly string[]): unknown {
  if (!(error instanceof Error) && !ProxyError.isInstance(error)) return error;
  const message = redactSecrets(error.message, secrets);
  if (message === error.message) return error;
  return ProxyError.isInstance(error) ? new ProxyError(error.code, message) : new Error(message);
}

/** {@link redactSecrets} for one text and the credential a request carried. */
export function redactCredential(text: string, credential: PresentedCredential | undefined): string {
  return redactSecrets(text, secretsOf(credential));
}
