import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The order through the compose stack (tests/deploy/compose-order.spec.ts), run by
// scripts/deploy-run.sh only, while the stack is up: neither `npm test` config includes it (a
// `.spec.ts` outside tests/e2e), and it has no build step of its own (the images are built).
export default defineConfig({
  root: fileURLToPath(new URL('../..', import.meta.url)),
  resolve: { alias: { '@': fileURLToPath(new URL('../..', import.meta.url)) } },
  test: {
    include: ['tests/deploy/compose-order.spec.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: 'forks',
  },
});
