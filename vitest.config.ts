import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { alias: { '@': fileURLToPath(new URL('.', import.meta.url)) } },
  test: {
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', '.data/**', '.models/**', 'tests/e2e/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Vitest's default leaves one core idle on a 2-core machine; most files wait on child
    // processes and sockets, so two at once roughly halve the run.
    maxWorkers: 2,
    // One throwaway PostgreSQL cluster per run; each test file that needs it makes its own database.
    globalSetup: ['tests/support/postgres-cluster.ts'],
  },
});
