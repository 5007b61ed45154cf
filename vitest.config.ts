import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { alias: { '@': fileURLToPath(new URL('.', import.meta.url)) } },
  test: {
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', '.data/**', '.models/**', 'tests/e2e/**'],
    // A liveness guard, never a speed assertion: process-heavy tests (a proxy, its downstreams, a
    // shop) took over 30 s on a starved machine at two workers and passed given the time.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two files at once on a 2-core machine (Vitest's default there is one): the unit run takes
    // about 935 s instead of 1 600 s. A test that spawns a process waits on what that process
    // says, never on a grace period that a loaded machine can outlast (tests/proxy/cli.test.ts).
    maxWorkers: 2,
    // One throwaway PostgreSQL cluster per run; each test file that needs it makes its own database.
    globalSetup: ['tests/support/postgres-cluster.ts'],
  },
});
