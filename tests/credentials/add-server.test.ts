import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, describe, expect, it } from 'vitest';
import { checkPidFile, pidFilePath, processStartTime, readProxyEnv, runAddServer } from '../../proxy/cli/index';
import { type HttpFixture, startHttpFixture } from '../fixtures/http-fixture-server';
import { startModernHttpFixture } from '../fixtures/modern-http-fixture-server';
import { callTool, searchNames, textOf } from '../proxy/helpers';
import { bin, type CliResult, cliEnv, configIn, runCli } from './cli-run';
import { leakScan, testTokens } from './leak-scan';

const leaks = leakScan();
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function fixture(bearer?: string): Promise<HttpFixture> {
  const started = await startHttpFixture(bearer === undefined ? {} : { bearer });
  cleanups.push(() => started.close());
  return started;
}

/** The CLI spawn for the end-to-end case; the rest run `add-server` in-process (same code, less CPU). */
async function addServerProcess(options: { configPath: string; name: string; url: string; token: string }) {
  const result = await runCli(
    ['add-server', '--name', options.name, '--url', options.url, '--token-stdin', '--config', options.configPath],
    { input: `${options.token}\n` },
  );
  leaks.capture(result.stdout);
  leaks.capture(result.stderr);
  return result;
}

async function runInProcess(argv: string[], stdin = ''): Promise<CliResult> {
  const out: string[] = [];
  const err: string[] = [];
  const status = await runAddServer({
    argv,
    env: readProxyEnv({}),
    io: { readStdin: async () => stdin, out: (line) => out.push(line), err: (line) => err.push(line) },
  });
  const result = {
    status,
    stdout: out.map((line) => `${line}\n`).join(''),
    stderr: err.map((line) => `${line}\n`).join(''),
  };
  leaks.capture(result.stdout);
  leaks.capture(result.stderr);
  return result;
}

function addServer(options: { configPath: string; name: string; url: string; token: string }): Promise<CliResult> {
  return runInProcess(
    ['--name', options.name, '--url', options.url, '--token-stdin', '--config', options.configPath],
    `${options.token}\n`,
  );
}

/**
 * A live process that is not a proxy. It prints HUP on SIGHUP and USR2 (then exits) on SIGUSR2.
 * The kernel delivers pending standard signals lowest number first, and SIGHUP (1) < SIGUSR2
 * (12), so a SIGHUP sent before our SIGUSR2 is always printed before USR2: reading the output
 * after exit tells, without a race, whether it was ever signalled.
 */
async function bystander(): Promise<{
  pid: number;
  /** Resolves once the process has handled a SIGHUP (signals of two kinds may be handled out of order). */
  untilHangup: () => Promise<void>;
  hangupsAfterStop: () => Promise<number>;
}> {
  const child = spawn(
    process.execPath,
    [
      '-e',
      "process.on('SIGHUP',()=>process.stdout.write('HUP\\n'));process.on('SIGUSR2',()=>{process.stdout.write('USR2\\n');process.exit(0)});process.stdout.write('ready\\n');setInterval(()=>{},1e6)",
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const printed = (line: string) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (!output.split('\n').includes(line)) return;
        child.stdout.off('data', check);
        resolve();
      };
      child.stdout.on('data', check);
      check();
    });
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  await printed('ready');
  cleanups.push(async () => child.kill('SIGKILL'));
  return {
    pid: child.pid ?? 0,
    untilHangup: () => printed('HUP'),
    async hangupsAfterStop() {
      child.kill('SIGUSR2');
      await exited;
      expect(output).toContain('USR2');
      return output.split('\n').filter((line) => line === 'HUP').length;
    },
  };
}

const baseConfig = { mcpServers: {}, filters: { similarity_threshold: 0 } };

describe('add-server: verify first, write nothing on failure', () => {
  it('a wrong token: exit 1, nothing written, no temporary file left', async () => {
    const server = await fixture(testTokens.configured);
    const { folder, configPath } = configIn(baseConfig);
    const before = readFileSync(configPath, 'utf8');
    const result = await addServer({ configPath, name: 'notion', url: server.url, token: testTokens.wrong });
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(
      /could not verify "notion" at .*: the server rejected the token \(HTTP 401\)\. Nothing was written\./,
    );
    expect(readFileSync(configPath, 'utf8')).toBe(before);
    expect(readdirSync(folder)).toEqual(['config.json']);
    expect(server.seen.map((request) => request.headers.authorization)).toContain(`Bearer ${testTokens.wrong}`);
  });

  it('a redirect: exit 1, reported with its target, not followed, nothing written', async () => {
    const server = await fixture();
    const { folder, configPath } = configIn(baseConfig);
    const result = await addServer({ configPath, name: 'moved', url: server.redirectUrl, token: testTokens.added });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(`redirect (HTTP 307) to ${server.url}; redirects are never followed`);
    expect(server.seen.map((request) => request.path)).toEqual(['/redirect']);
    expect(readdirSync(folder)).toEqual(['config.json']);
  });

  it('an existing name: exit 2, refused before anything is sent or written', async () => {
    const server = await fixture();
    const { folder, configPath } = configIn({ mcpServers: { notion: { url: 'https://mcp.notion.example/mcp' } } });
    const before = readFileSync(configPath, 'utf8');
    const result = await addServer({ configPath, name: 'notion', url: server.url, token: testTokens.added });
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/server "notion" is already configured .* refusing to re-point it/);
    expect(server.seen).toHaveLength(0);
    expect(readFileSync(configPath, 'utf8')).toBe(before);
    expect(readdirSync(folder)).toEqual(['config.json']);
  });

  it.each([
    ['no token source', ['--name', 'x', '--url', 'http://127.0.0.1:1/mcp']],
    ['both token sources', ['--name', 'x', '--url', 'http://127.0.0.1:1/mcp', '--token', 'a', '--token-stdin']],
    ['a name with "__"', ['--name', 'a__b', '--url', 'http://127.0.0.1:1/mcp', '--token', 'a']],
    ['a non-http URL', ['--name', 'x', '--url', 'file:///etc/passwd', '--token', 'a']],
  ])('bad usage (%s): exit 2', async (_name, args) => {
    const { configPath } = configIn(baseConfig);
    const result = await runInProcess([...args, '--config', configPath]);
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/^extensible-mcp add-server: /);
  });
});

describe('add-server: writes', () => {
  it('writes the token (0600, atomic, comments and other lines kept) and the server, keeping the config', async () => {
    const server = await fixture(testTokens.added);
    const { folder, configPath } = configIn(baseConfig);
    const tokensPath = join(folder, 'tokens');
    const previous = `# operator tokens\n\nother="${testTokens.other}"\n# end\n`;
    writeFileSync(tokensPath, previous, { mode: 0o644 });
    const result = await addServer({ configPath, name: 'notion', url: server.url, token: testTokens.added });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/verified: 5 tools/);
    expect(result.stdout).toMatch(/no running proxy signalled \(pid file missing\)/);
    expect(statSync(tokensPath).mode & 0o777).toBe(0o600);
    expect(readFileSync(tokensPath, 'utf8')).toBe(`${previous}notion=${testTokens.added}\n`);
    expect(JSON.parse(readFileSync(configPath, 'utf8'))).toEqual({
      mcpServers: { notion: { url: server.url } },
      filters: { similarity_threshold: 0 },
    });
    expect(readdirSync(folder).sort()).toEqual(['config.json', 'tokens']);
  });
});

describe('add-server: a 2026-07-28 server', () => {
  it('passes the check in the version the proxy will speak to it, the token on every request', async () => {
    const server = await startModernHttpFixture({ bearer: testTokens.added });
    cleanups.push(() => server.close());
    const { configPath } = configIn(baseConfig);
    const result = await addServer({ configPath, name: 'modern', url: server.url, token: testTokens.added });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/verified: 6 tools \(echo, whoami, greet, nag, hang, grow\)/);
    expect(server.methods).toEqual(['server/discover', 'tools/list']);
    expect(new Set(server.authorizations)).toEqual(new Set([`Bearer ${testTokens.added}`]));
    expect(JSON.parse(readFileSync(configPath, 'utf8')).mcpServers).toEqual({ modern: { url: server.url } });
  });
});

describe('add-server: signals only a verified running proxy', () => {
  function record(fields: { pid: number; config: string; started?: string }): string {
    return JSON.stringify({
      pid: fields.pid,
      instance: '0123456789abcdef0123456789abcdef',
      config: fields.config,
      started: fields.started ?? processStartTime(fields.pid),
    });
  }

  const cases: [string, (configPath: string, pid: number) => string][] = [
    ['stale (dead pid)', (configPath) => record({ pid: 2_147_483_646, config: realpathSync(configPath) })],
    ['garbage', () => 'not a pid file\n'],
    [
      'foreign (reused pid: start time differs)',
      (configPath, pid) => record({ pid, config: realpathSync(configPath), started: 'linux:x:1' }),
    ],
    ['foreign (another config)', (_configPath, pid) => record({ pid, config: '/elsewhere/config.json' })],
  ];

  it.each(cases)('never signals a %s pid file', async (_name, content) => {
    const other = await bystander();
    const server = await fixture();
    const { configPath } = configIn(baseConfig);
    writeFileSync(pidFilePath(configPath), content(configPath, other.pid));
    expect(checkPidFile(configPath).live).toBe(false);
    const result = await addServer({ configPath, name: 'added', url: server.url, token: testTokens.added });
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/no running proxy signalled \(pid file (dead|garbage|foreign)\)/);
    expect(await other.hangupsAfterStop()).toBe(0);
  });

  it('control: a pid file that verifiably names a proxy for this config is signalled', async () => {
    const other = await bystander();
    const server = await fixture();
    const { configPath } = configIn(baseConfig);
    writeFileSync(pidFilePath(configPath), record({ pid: other.pid, config: realpathSync(configPath) }));
    const result = await addServer({ configPath, name: 'added', url: server.url, token: testTokens.added });
    expect(result.stdout).toContain(`signalled the running proxy (pid ${other.pid})`);
    await other.untilHangup();
    expect(await other.hangupsAfterStop()).toBe(1);
  });

  it('a running proxy indexes the new server in place; a client finds and calls its tools; a second proxy is refused', async () => {
    const server = await fixture(testTokens.added);
    const { configPath } = configIn(baseConfig);
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [bin, '--config', configPath],
      env: cliEnv(),
      stderr: 'pipe',
    });
    let proxyLog = '';
    const waiters: { pattern: RegExp; resolve: () => void }[] = [];
    transport.stderr?.on('data', (chunk: Buffer) => {
      proxyLog += chunk.toString();
      for (const waiter of waiters.filter((entry) => entry.pattern.test(proxyLog))) waiter.resolve();
    });
    const logged = (pattern: RegExp) =>
      new Promise<void>((resolve) => {
        if (pattern.test(proxyLog)) resolve();
        else waiters.push({ pattern, resolve });
      });
    const client = new Client({ name: 'add-server-e2e', version: '1.0.0' });
    await client.connect(transport);
    cleanups.push(async () => {
      await client.close();
      leaks.capture(proxyLog);
    });
    expect(await searchNames(client, 'echoes back the message')).toEqual([]);
    const holder = checkPidFile(configPath);
    expect(holder.live).toBe(true);

    const second = await runCli(['--config', configPath]);
    leaks.capture(second.stderr);
    expect(second.status).toBe(2);
    expect(second.stderr).toMatch(/Another extensible-mcp \(pid \d+\) is already serving/);
    expect(checkPidFile(configPath)).toEqual(holder);

    const added = await addServerProcess({ configPath, name: 'added', url: server.url, token: testTokens.added });
    expect(added.status).toBe(0);
    expect(added.stdout).toMatch(/signalled the running proxy \(pid \d+\); it connects "added" now/);
    await logged(/reload: server "added" added with 5 tools/);
    expect(await searchNames(client, 'echoes back the message')).toContain('added__echo');
    const echoed = await callTool(client, 'added__echo', { message: 'reloaded' });
    leaks.capture(echoed);
    expect(textOf(echoed)).toBe('echo: reloaded');
    expect(server.calls).toEqual([{ tool: 'echo', args: { message: 'reloaded' } }]);
    expect(server.seen.at(-1)?.headers.authorization).toBe(`Bearer ${testTokens.added}`);

    await client.close();
    // A clean stop releases the pid file.
    expect(existsSync(pidFilePath(configPath))).toBe(false);
  });
});
