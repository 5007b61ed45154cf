import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';

// `npm run demo`: the Order Pizza web app on http://localhost:3000 (no API key and no network
// needed: the offline planner drives the chat). Builds once, then `next start`; the server prints
// the chat and approval-window URLs, which agent runs, and the enrollment codes.
//
// It listens on 127.0.0.1 only (issue 26 defect 7): the chat, the log and enrolment are not for
// the LAN. `npm run demo -- --host 0.0.0.0` is the operator saying otherwise (the container does);
// `--port` moves it (then set EXTENSIBLE_MCP_ORIGIN to match: passkeys and the Host rule use it).
const { values } = parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '3000' },
  },
  strict: true,
});
if (!/^\d{1,5}$/.test(values.port)) {
  process.stderr.write(`--port must be a port number, not ${JSON.stringify(values.port)}\n`);
  process.exit(2);
}
const next = 'node_modules/next/dist/bin/next';
if (!existsSync('.next/BUILD_ID')) {
  process.stdout.write('Building the app (first run only)…\n');
  const build = spawnSync(process.execPath, [next, 'build'], { stdio: 'inherit' });
  if (build.status !== 0) process.exit(build.status ?? 1);
}
const server = spawn(process.execPath, [next, 'start', '--hostname', values.host, '--port', values.port], {
  stdio: 'inherit',
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => server.kill(signal));
server.on('exit', (code) => process.exit(code ?? 0));
