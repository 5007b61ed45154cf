/**
 * The Host rule (SPEC §8, issue 26 defect 5): every route answers only for the configured origin's
 * host. A DNS-rebinding page reaches the server under its own name (`Host: attacker.example:3000`),
 * so refusing every other Host keeps the log, the audit and the chat out of its reach. The
 * interceptor (`proxy.ts`) applies it to every request and `/mcp` passes the same host to the
 * proxy library's own check: one rule.
 */

/** The one `Host` header value the app accepts: the origin's host (and port, unless it is the scheme's default), lower-cased. */
export function allowedHost(origin: string): string {
  return new URL(origin).host.toLowerCase();
}

/** Whether a request's `Host` header names the app's own origin; a missing header never does. */
export function isAllowedHost(host: string | null, origin: string): boolean {
  return host !== null && host.trim().toLowerCase() === allowedHost(origin);
}
