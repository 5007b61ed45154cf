import { spawnSync } from 'node:child_process';
import { root } from './app-server';

/**
 * Vitest global setup: one production build for every e2e spec, made by the deploy's own build
 * step (`deploy/steps.sh build`, the command the app's Dockerfile runs), so the deploy spec tests
 * the images' build without a second `next build`.
 */
export default function setup(): void {
  const build = spawnSync('bash', ['deploy/steps.sh', 'build'], {
    cwd: root,
    stdio: 'inherit',
  });
  if (build.status !== 0) throw new Error(`next build failed (exit ${build.status})`);
}
