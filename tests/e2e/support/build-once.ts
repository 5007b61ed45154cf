import { spawnSync } from 'node:child_process';
import { root } from './app-server';

/** Vitest global setup: one production build (`next build`) for every e2e spec. */
export default function setup(): void {
  const build = spawnSync(process.execPath, ['node_modules/next/dist/bin/next', 'build'], {
    cwd: root,
    stdio: 'inherit',
  });
  if (build.status !== 0) throw new Error(`next build failed (exit ${build.status})`);
}
