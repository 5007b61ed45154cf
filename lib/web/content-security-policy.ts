/**
 * The app's Content-Security-Policy (issue 26 defect 9), one per response with a nonce of its own.
 * Scripts run only when they carry this response's nonce, or when a nonced script loaded them
 * (`'strict-dynamic'`: Next's chunk loader), so an injected `<script>` or event handler never
 * runs; no `'unsafe-inline'` anywhere. Styles: the app's CSS is one stylesheet from `'self'`
 * (Tailwind, built), and any `<style>` Next.js itself emits carries the nonce, so `style-src`
 * needs no `'unsafe-inline'` either (the app sets no inline `style` attributes).
 */

/** What the policy depends on besides the nonce. */
export interface ContentSecurityPolicyOptions {
  /** The per-response nonce ({@link newNonce}). */
  readonly nonce: string;
  /** The app's origin: an https origin also upgrades any stray http subresource. */
  readonly origin: string;
  /** `next dev`: React's development build needs `eval` for its error overlays; production never does. */
  readonly development: boolean;
}

/** A fresh nonce: 128 random bits, base64 (the CSP `nonce-source` grammar). */
export function newNonce(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes));
}

/** The policy's header value. */
export function contentSecurityPolicy(options: ContentSecurityPolicyOptions): string {
  const nonce = `'nonce-${options.nonce}'`;
  const directives = [
    "default-src 'self'",
    `script-src ${nonce} 'strict-dynamic'${options.development ? " 'unsafe-eval'" : ''}`,
    `style-src 'self' ${nonce}`,
    "img-src 'self' data:",
    "font-src 'self'",
    // The chat's and the log's event streams and every API call are same-origin.
    "connect-src 'self'",
    "object-src 'none'",
    // No <base> may re-point the app's relative script and form URLs.
    "base-uri 'none'",
    "form-action 'self'",
    // The approval window's buttons must never sit under someone else's page (clickjacking).
    "frame-ancestors 'none'",
    ...(new URL(options.origin).protocol === 'https:' ? ['upgrade-insecure-requests'] : []),
  ];
  return directives.join('; ');
}
