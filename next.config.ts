import type { NextConfig } from 'next/types';

/**
 * The Order Pizza app. Native and WASM dependencies are loaded by Node at run time, never bundled,
 * so they stay server-side (SPEC §8). Every page refuses to be framed: the approval window's
 * buttons must never sit under someone else's page. The Content-Security-Policy (with
 * `frame-ancestors 'none'`) is per request, from the root `proxy.ts`, since it carries a nonce.
 */
const nextConfig: NextConfig = {
  poweredByHeader: false,
  reactStrictMode: true,
  // The app's own type-check scope: Next's global types (a required NODE_ENV) would break the
  // tests' child-process environments, so the root tsconfig never loads them.
  typescript: { tsconfigPath: 'tsconfig.next.json' },
  // Server code keeps its function names: the live log and the proxy's events name each filter by
  // its function (`accessControl`, `discoveryGate`), which minification would rename.
  experimental: { serverMinification: false },
  serverExternalPackages: [
    'better-sqlite3',
    'onnxruntime-node',
    '@huggingface/transformers',
    '@open-policy-agent/opa-wasm',
  ],
  async headers() {
    return [
      {
        source: '/:path*',
        headers: [
          { key: 'X-Frame-Options', value: 'DENY' },
          { key: 'X-Content-Type-Options', value: 'nosniff' },
          { key: 'Referrer-Policy', value: 'same-origin' },
        ],
      },
    ];
  },
};

export default nextConfig;
