import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The browser specs (`tests/e2e/*.spec.ts`): real Chromium against the production build, which
// the global setup makes once for every spec.
export default defineConfig({
  resolve: { alias: { '@': fileURLToPath(new URL('.', import.meta.url)) } },
  test: {
    include: ['tests/e2e/**/*.spec.ts'],
    globalSetup: ['tests/e2e/support/build-once.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: 'forks',
    fileParallelism: false,
  },
});
