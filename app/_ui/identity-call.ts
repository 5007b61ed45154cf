/** What a JSON call to the identity routes came back with. */
export type Answer<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

/** Calls an identity route with JSON; a refusal comes back as its words, a network fault as a sentence. */
export async function identityCall<T>(
  path: string,
  init: { method: 'GET' | 'POST'; body?: unknown },
): Promise<Answer<T>> {
  try {
    const response = await fetch(path, {
      method: init.method,
      cache: 'no-store',
      ...(init.method === 'POST'
        ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(init.body ?? {}) }
        : {}),
    });
    const value = (await response.json().catch(() => ({}))) as T & { error?: string };
    if (response.ok) return { ok: true, value };
    return { ok: false, error: value.error ?? `the server answered ${response.status}` };
  } catch {
    return { ok: false, error: 'the server cannot be reached; check that it is running' };
  }
}
