import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

// `npm run demo`: the Order Pizza web app on http://localhost:3000 (no API key and no network
// needed: the offline planner drives the chat). Builds once, then `next start`; the server prints
// the chat and approval-window URLs, which agent runs, and the enrollment codes.
const next = 'node_modules/next/dist/bin/next';
if (!existsSync('.next/BUILD_ID')) {
  process.stdout.write('Building the app (first run only)…\n');
  const build = spawnSync(process.execPath, [next, 'build'], { stdio: 'inherit' });
  if (build.status !== 0) process.exit(build.status ?? 1);
}
const server = spawn(process.execPath, [next, 'start', '-p', '3000'], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => server.kill(signal));
server.on('exit', (code) => process.exit(code ?? 0));
