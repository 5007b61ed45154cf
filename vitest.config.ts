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
    // One file at a time on a 2-core machine (Vitest's default there). Two at once halved the run
    // (unit 935 s against about 1 600 s) but starved the process-spawning tests of CPU: a CLI's
    // first search came back empty and a takeover on PostgreSQL outran its 180 s. Tests never
    // depend on wall-clock speed, but these wait on real children, so two workers wait for
    // fixes that make them robust to a starved machine (docs/scale-out.md, next).
    // One throwaway PostgreSQL cluster per run; each test file that needs it makes its own database.
    globalSetup: ['tests/support/postgres-cluster.ts'],
  },
});
