import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The browser specs (`tests/e2e/*.spec.ts`) and the security specs that need the real app
// (`tests/security/*.spec.ts`): real Chromium and `next start` against the production build, which
// the global setup makes once for every spec. After each file, no page may have broken the CSP.
export default defineConfig({
  resolve: { alias: { '@': fileURLToPath(new URL('.', import.meta.url)) } },
  test: {
    include: ['tests/e2e/**/*.spec.ts', 'tests/security/**/*.spec.ts'],
    // The build, and one throwaway PostgreSQL cluster for the specs of several instances on one database.
    globalSetup: ['tests/e2e/support/build-once.ts', 'tests/support/postgres-cluster.ts'],
    setupFiles: ['tests/e2e/support/csp-check.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: 'forks',
    fileParallelism: false,
  },
});
