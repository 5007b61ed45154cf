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
    const response = await options.fetch(input, { ...init, headers });
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

/**
 * Replaces every occurrence of a secret in every string of a JSON-like value (a tool result,
 * an error text) with `[redacted]`, in case a server echoes the request back: a debug tool,
 * a reflected header, an error page quoting the request. Longer secrets go first, so a
 * `Bearer x` header is removed whole rather than leaving its prefix behind.
 */
export function redactSecrets<T>(value: T, secrets: readonly string[]): T {
  if (secrets.length === 0) return value;
  const ordered = [...secrets].sort((a, b) => b.length - a.length);
  const redact = (item: unknown): unknown => {
    if (typeof item === 'string') {
      return ordered.reduce(
        (text, secret) => (text.includes(secret) ? text.split(secret).join('[redacted]') : text),
        item,
      );
    }
    if (Array.isArray(item)) return item.map(redact);
    if (item !== null && typeof item === 'object') {
      return Object.fromEntries(Object.entries(item).map(([key, entry]) => [redact(key), redact(entry)]));
    }
    return item;
  };
  return redact(value) as T;
}

/** {@link redactSecrets} for one text and the credential a request carried. */
export function redactCredential(text: string, credential: PresentedCredential | undefined): string {
  return redactSecrets(text, secretsOf(credential));
}
