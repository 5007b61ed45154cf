import { type NextRequest, NextResponse } from 'next/server';
import { interceptRequest } from './lib/web/intercept-request';

/**
 * Next.js 16's request interceptor, and only that (SPEC §2): the Host rule on every route (DNS
 * rebinding) and the per-request nonce behind the strict Content-Security-Policy. It never
 * imports the `proxy/` library; the rules live in `lib/web/`. No matcher: static files, streams,
 * route handlers and `/mcp` go through it too.
 */
export function proxy(request: NextRequest): Response {
  const verdict = interceptRequest(request.headers);
  if (!verdict.allowed) return verdict.response;
  // Next.js finds the nonce in the request's policy header and puts it on its own scripts.
  const headers = new Headers(request.headers);
  headers.set('content-security-policy', verdict.policy);
  headers.set('x-nonce', verdict.nonce);
  const response = NextResponse.next({ request: { headers } });
  response.headers.set('content-security-policy', verdict.policy);
  return response;
}
