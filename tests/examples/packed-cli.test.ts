import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { callTool, searchNames, textOf } from '../proxy/helpers';
import { connectStdio, offlineEnvironment, root, type StdioSession } from './support';

const run = promisify(execFile);

// The CLI outside a checkout: pack the project as npm would publish it, install the tarball into
// an empty folder, and use the installed bins from there. Installing resolves every dependency
// from the npm cache when it can (--prefer-offline). better-sqlite3's install looks for a local
// prebuild before it downloads or compiles one; the test hands it this checkout's own build of the
// same version for this Node (what the package is, not how its native dependency compiles, is
// under test here: compiling it again took two of the test's three minutes on a 2-core machine).
const installTimeoutMs = 8 * 60_000;
const work = mkdtempSync(join(tmpdir(), 'emcp-packed-'));
const app = join(work, 'app');
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const sessions: StdioSession[] = [];

afterAll(async () => {
  await Promise.allSettled(sessions.map((session) => session.close()));
  rmSync(work, { recursive: true, force: true });
});

/** Runs a command to completion; rejects with its output when it fails. */
async function runIn(cwd: string, command: string, args: string[], timeout = 60_000, env: Record<string, string> = {}) {
  return run(command, args, { cwd, env: offlineEnvironment(env), timeout, maxBuffer: 64 * 1024 * 1024 });
}

/** The project's `.npmrc` lines that keep onnxruntime from downloading at install time. */
function onnxruntimeSettings(): string {
  return readFileSync(join(root, '.npmrc'), 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('onnxruntime-node-install'))
    .join('\n');
}

/**
 * A prebuild tarball of this checkout's better-sqlite3, named as its installer looks for it, and
 * the environment that points the installer at it.
 */
async function localSqlitePrebuild(): Promise<Record<string, string>> {
  const packageDir = join(root, 'node_modules/better-sqlite3');
  const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { version: string };
  const prebuilds = join(work, 'prebuilds');
  mkdirSync(prebuilds);
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  await runIn(packageDir, 'tar', ['-czf', join(prebuilds, name), 'build/Release/better_sqlite3.node']);
  return { npm_config_better_sqlite3_local_prebuilds: prebuilds };
}

/** Packs the project and lists what the tarball holds. Secrets left in examples/ must never be packed. */
async function pack(): Promise<{ tarball: string; files: string[] }> {
  // Canaries of what a user keeps beside a config (all git-ignored): a packed tarball must not
  // carry them, whatever `files` in package.json includes.
  const canaries = join(root, 'examples', `pack-canary-${process.pid}`);
  mkdirSync(canaries, { recursive: true });
  for (const name of ['.env', 'tokens', 'config.json.pid']) writeFileSync(join(canaries, name), 'SECRET=canary\n');
  try {
    const { stdout } = await runIn(root, 'npm', ['pack', '--json', '--pack-destination', work]);
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf('['))) as { filename: string; files: { path: string }[] }[];
    if (!packed) throw new Error(`npm pack said nothing: ${stdout}`);
    return { tarball: join(work, packed.filename), files: packed.files.map((file) => file.path) };
  } finally {
    rmSync(canaries, { recursive: true, force: true });
  }
}

describe('the CLI outside a checkout (npm pack, install into an empty folder)', () => {
  it(
    'installs from the tarball and serves --help, a stdio session and mcp-elicitation-proxy',
    async () => {
      const started = Date.now();
      const { tarball, files } = await pack();
      expect(files).toEqual(
        expect.arrayContaining([
          'bin/extensible-mcp.mjs',
          'bin/mcp-elicitation-proxy.mjs',
          'proxy/cli/index.ts',
          'proxy/index.ts',
          'examples/github/config.json',
          'examples/github/close-issue.wasm',
          'examples/filesystem/config.json',
          'README.md',
        ]),
      );
      expect(files.filter((path) => /^(tests|shop-agent|scripts)\//.test(path) || path.endsWith('.test.ts'))).toEqual(
        [],
      );
      expect(files.filter((path) => /(^|\/)(\.env|tokens|[^/]*\.pid)$/.test(path))).toEqual([]);

      mkdirSync(app);
      writeFileSync(join(app, 'package.json'), '{"name": "packed-cli-test", "private": true}\n');
      writeFileSync(join(app, '.npmrc'), `${onnxruntimeSettings()}\n`);
      const prebuild = await localSqlitePrebuild();
      await runIn(
        app,
        'npm',
        ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball],
        installTimeoutMs,
        prebuild,
      );
      const installedIn = Date.now();
      // The bins are the installed package's own copy, not this checkout's.
      for (const name of ['extensible-mcp', 'mcp-elicitation-proxy']) {
        expect(realpathSync(join(app, 'node_modules/.bin', name))).toBe(
          realpathSync(join(app, 'node_modules/extensible-mcp/bin', `${name}.mjs`)),
        );
      }

      const help = await runIn(app, join(app, 'node_modules/.bin/extensible-mcp'), ['--help']);
      expect(help.stdout).toContain('extensible-mcp: an MCP proxy');
      for (const flag of ['--config', '--http', '--call-timeout', '--offline']) expect(help.stdout).toContain(flag);

      // A stdio session through a real SDK client, the config and the working directory outside the checkout.
      const config = join(work, 'config.json');
      writeFileSync(
        config,
        JSON.stringify({
          mcpServers: { everything: { command: process.execPath, args: [everything, 'stdio'] } },
          filters: { access_control: { deny_patterns: ['everything__trigger-*'] } },
        }),
      );
      const session = await connectStdio({
        command: join(app, 'node_modules/.bin/extensible-mcp'),
        args: ['--config', config],
        cwd: app,
        env: offlineEnvironment(),
      });
      sessions.push(session);
      // A search waits 10 s at most for servers still connecting: wait for the start's end instead.
      await session.untilStderr(/connected \d+ of \d+ servers/);
      expect((await session.client.listTools()).tools.map((tool) => tool.name)).toEqual([
        'search_tools',
        'call_tool',
        'load_mcp_server',
      ]);
      expect(await searchNames(session.client, 'echo back a message'), session.stderr()).toContain('everything__echo');
      expect(textOf(await callTool(session.client, 'everything__echo', { message: 'packed' }))).toBe('Echo: packed');
      expect(session.stderr()).toContain(`config: ${config}`);

      const transparentHelp = await runIn(app, join(app, 'node_modules/.bin/mcp-elicitation-proxy'), ['--help']);
      expect(transparentHelp.stdout).toContain('mcp-elicitation-proxy --config FILE');

      const yaml = join(work, 'transparent.yaml');
      writeFileSync(
        yaml,
        `proxy:\n  name: packed\nupstream:\n  command: ${JSON.stringify(process.execPath)}\n  args: [${JSON.stringify(everything)}, "stdio"]\n`,
      );
      const transparent = await connectStdio({
        command: join(app, 'node_modules/.bin/mcp-elicitation-proxy'),
        args: ['--config', yaml],
        cwd: app,
        env: offlineEnvironment(),
      });
      sessions.push(transparent);
      expect((await transparent.client.listTools()).tools.map((tool) => tool.name)).toContain('echo');

      process.stderr.write(
        `packed CLI: pack + install ${Math.round((installedIn - started) / 1000)} s, total ${Math.round((Date.now() - started) / 1000)} s\n`,
      );
    },
    installTimeoutMs + 2 * 60_000,
  );
});
