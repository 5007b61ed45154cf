import { type InterceptorEnv, readInterceptorEnv } from '../env';
import { contentSecurityPolicy, newNonce } from './content-security-policy';
import { allowedHost, isAllowedHost } from './host-rule';

// The root `proxy.ts` imports this file directly rather than `lib/index`: that entry pulls in the
// household runtime and the proxy library, which SPEC §2 keeps out of the interceptor. This file
// imports only the environment parser and the two rules beside it.

/** What the interceptor does with one request. */
export type InterceptVerdict =
  | { readonly allowed: false; readonly response: Response }
  /** Let it through: Next.js reads the nonce from the request's policy and stamps its own scripts with it. */
  | { readonly allowed: true; readonly nonce: string; readonly policy: string };

let cached: InterceptorEnv | undefined;

/** The interceptor's environment, parsed once per process (the variables do not change under a running server). */
function interceptorEnv(): InterceptorEnv {
  if (cached === undefined) cached = readInterceptorEnv();
  return cached;
}

/**
 * Every request, before any route: refused unless its `Host` is the configured origin's (DNS
 * rebinding), otherwise given a fresh nonce and the strict CSP built on it. An environment that
 * does not parse refuses everything (fail closed) and says why in the server's output.
 */
export function interceptRequest(headers: Headers): InterceptVerdict {
  let env: InterceptorEnv;
  try {
    env = interceptorEnv();
  } catch (error) {
    console.error('refusing every request:', error instanceof Error ? error.message : error);
    return {
      allowed: false,
      response: refusal(503, 'The server is misconfigured: EXTENSIBLE_MCP_ORIGIN does not parse.'),
    };
  }
  if (!isAllowedHost(headers.get('host'), env.origin)) {
    return {
      allowed: false,
      response: refusal(
        403,
        `Forbidden: unexpected Host header. This app answers only at ${env.origin} (host ${allowedHost(env.origin)}).`,
      ),
    };
  }
  const nonce = newNonce();
  return {
    allowed: true,
    nonce,
    policy: contentSecurityPolicy({ nonce, origin: env.origin, development: env.development }),
  };
}

/** A refusal in words, never cached, that no browser will render as a page with scripts. */
function refusal(status: number, message: string): Response {
  return new Response(`${message}\n`, {
    status,
    headers: {
      'content-type': 'text/plain; charset=utf-8',
      'cache-control': 'no-store',
      'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
      'x-content-type-options': 'nosniff',
    },
  });
}
