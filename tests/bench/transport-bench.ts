import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { freePort } from '../e2e/support/app-server';
import { type Latency, summarise } from './measure';

/**
 * Transport figures (issue 31): Streamable HTTP throughput with concurrent 2025-session clients,
 * proxied against direct to the same server, with each process's CPU time beside it; and how long
 * an orderly stdio shutdown takes. Every server is a real process on loopback.
 */

const offline = { ...process.env, EXTENSIBLE_MCP_OFFLINE: '1', EXTENSIBLE_MCP_MODEL_DIR: join(tmpdir(), 'no-model') };

/** CPU seconds (user + system) a process has used so far, read from /proc. */
function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return 0;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 14 and 15 of stat(5), counted from the state (field 3), in clock ticks of 1/100 s.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Starts `node args…`; resolves once a stderr line matches `ready`, with what it captured. */
async function startProcess(args: string[], ready: RegExp): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const child = spawn(process.execPath, args, { env: offline, stdio: ['pipe', 'pipe', 'pipe'] });
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    let seen = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      const found = ready.exec(seen);
      if (found) resolve(found);
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited (${code}): ${seen}`)));
  });
  return { child, match };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/** `count` real SDK clients, each its own 2025 session at `url`. */
async function sessions(url: string, count: number): Promise<Client[]> {
  return Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const client = new Client({ name: `bench-${index}`, version: '1' });
      await client.connect(new StreamableHTTPClientTransport(new URL(url)));
      return client;
    }),
  );
}

/** Every client calls `call` `perClient` times in a loop, all at once: calls/s and latency. */
async function load(
  clients: readonly Client[],
  perClient: number,
  call: (client: Client) => Promise<unknown>,
): Promise<{ callsPerSecond: number; latency: Latency }> {
  const durations: bigint[] = [];
  const start = process.hrtime.bigint();
  await Promise.all(
    clients.map(async (client) => {
      for (let index = 0; index < perClient; index++) {
        const began = process.hrtime.bigint();
        await call(client);
        durations.push(process.hrtime.bigint() - began);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return { callsPerSecond: Math.round(durations.length / seconds), latency: summarise(durations) };
}

/**
 * Streamable HTTP with `clients` concurrent 2025 sessions: the fixture server directly, and the
 * same server through the proxy's CLI (`--http`, lexical search), in alternating rounds. CPU
 * seconds are each process's own during the measured rounds.
 */
export async function httpThroughput(options: { clients: number; perClient: number; rounds: number }) {
  const fixturePort = await freePort();
  const fixture = await startProcess(
    ['--import', 'tsx', 'examples/http-fixture-server.ts', String(fixturePort)],
    /fixture MCP server at (\S+)/,
  );
  const folder = await mkdtemp(join(tmpdir(), 'bench-http-'));
  const config = join(folder, 'config.json');
  await writeFile(config, JSON.stringify({ mcpServers: { fixture: { url: fixture.match[1] } } }));
  const proxy = await startProcess(
    ['bin/extensible-mcp.mjs', '--config', config, '--http', '--port', '0', '--store', 'memory:'],
    /serving Streamable HTTP at (\S+)/,
  );
  const arguments_ = { message: 'benchmark' };
  const direct = await sessions(fixture.match[1] ?? '', options.clients);
  const proxied = await sessions(proxy.match[1] ?? '', options.clients);
  await Promise.all(
    proxied.map((client) => client.callTool({ name: 'search_tools', arguments: { query: 'echo the message back' } })),
  );
  const callDirect = (client: Client) => client.callTool({ name: 'echo', arguments: arguments_ });
  const callProxied = (client: Client) =>
    client.callTool({ name: 'call_tool', arguments: { tool_name: 'fixture__echo', arguments: arguments_ } });
  // Warm both paths, then alternate measured rounds so drift in the machine's load hits both alike.
  await load(direct, 20, callDirect);
  await load(proxied, 20, callProxied);
  const figures = { direct: [] as number[], proxied: [] as number[] };
  const latencies = { direct: [] as Latency[], proxied: [] as Latency[] };
  const cpu = { directServer: 0, proxiedServer: 0, proxy: 0 };
  for (let round = 0; round < options.rounds; round++) {
    let before = cpuSeconds(fixture.child.pid);
    const viaDirect = await load(direct, options.perClient, callDirect);
    cpu.directServer += cpuSeconds(fixture.child.pid) - before;
    before = cpuSeconds(fixture.child.pid);
    const proxyBefore = cpuSeconds(proxy.child.pid);
    const viaProxy = await load(proxied, options.perClient, callProxied);
    cpu.proxiedServer += cpuSeconds(fixture.child.pid) - before;
    cpu.proxy += cpuSeconds(proxy.child.pid) - proxyBefore;
    figures.direct.push(viaDirect.callsPerSecond);
    figures.proxied.push(viaProxy.callsPerSecond);
    latencies.direct.push(viaDirect.latency);
    latencies.proxied.push(viaProxy.latency);
  }
  await Promise.allSettled([...direct, ...proxied].map((client) => client.close()));
  await Promise.all([stop(proxy.child), stop(fixture.child)]);
  const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
  const p99 = (list: readonly Latency[]) => median(list.map((latency) => latency.p99Us));
  const p50 = (list: readonly Latency[]) => median(list.map((latency) => latency.p50Us));
  const directCalls = median(figures.direct);
  const proxiedCalls = median(figures.proxied);
  const calls = options.clients * options.perClient * options.rounds;
  return {
    protocol: '2025-11-25 sessions',
    clients: options.clients,
    callsPerRound: options.clients * options.perClient,
    rounds: options.rounds,
    direct: { callsPerSecond: directCalls, p50Us: p50(latencies.direct), p99Us: p99(latencies.direct) },
    proxied: { callsPerSecond: proxiedCalls, p50Us: p50(latencies.proxied), p99Us: p99(latencies.proxied) },
    ratio: Math.round((proxiedCalls / directCalls) * 1000) / 1000,
    addedP99Us: Math.round((p99(latencies.proxied) - p99(latencies.direct)) * 10) / 10,
    cpuMicrosecondsPerCall: {
      directServer: Math.round((cpu.directServer / calls) * 1e6),
      proxiedServer: Math.round((cpu.proxiedServer / calls) * 1e6),
      proxy: Math.round((cpu.proxy / calls) * 1e6),
    },
  };
}

/** Resident memory of a process in MiB, read from /proc. */
function rssMiB(pid: number | undefined): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return Math.round((kib / 1024) * 10) / 10;
}

/**
 * The proxy's resident memory with `count` idle 2025 sessions open over Streamable HTTP (the
 * session cap raised to fit them): each session initialized and then left alone.
 */
export async function idleSessionsMemory(count: number) {
  const folder = await mkdtemp(join(tmpdir(), 'bench-rss-'));
  const config = join(folder, 'config.json');
  await writeFile(config, JSON.stringify({ mcpServers: {} }));
  const proxy = await startProcess(
    [
      'bin/extensible-mcp.mjs',
      '--config',
      config,
      '--http',
      '--port',
      '0',
      '--store',
      'memory:',
      '--max-sessions',
      String(count),
    ],
    /serving Streamable HTTP at (\S+)/,
  );
  const url = proxy.match[1] ?? '';
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const before = rssMiB(proxy.child.pid);
  for (let index = 0; index < count; index++) {
    const opened = await fetch(url, { method: 'POST', headers, body: initialize });
    await opened.text();
    const session = opened.headers.get('mcp-session-id') ?? '';
    const ready = await fetch(url, {
      method: 'POST',
      headers: { ...headers, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    await ready.text();
  }
  const after = rssMiB(proxy.child.pid);
  await stop(proxy.child);
  return {
    sessions: count,
    rssBeforeMiB: before,
    rssAfterMiB: after,
    kibPerSession: Math.round(((after - before) * 1024) / count),
  };
}

/** A JSON-RPC `initialize` line for a stdio proxy. */
const initialize = `${JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
})}\n`;

/**
 * How long the stdio CLI takes from end of input to exit, in both modes, each with a connected
 * stdio downstream: `runs` starts each, median and worst in milliseconds.
 */
export async function stdioShutdown(runs: number) {
  const folder = await mkdtemp(join(tmpdir(), 'bench-shutdown-'));
  const search = join(folder, 'search.json');
  await writeFile(
    search,
    JSON.stringify({
      mcpServers: {
        fixture: { command: process.execPath, args: ['--import', 'tsx', 'tests/fixtures/stdio-fixture-server.ts'] },
      },
    }),
  );
  const transparent = join(folder, 'transparent.yaml');
  const everything = 'node_modules/@modelcontextprotocol/server-everything/dist/index.js';
  await writeFile(
    transparent,
    `upstream:\n  command: ${JSON.stringify(process.execPath)}\n  args: [${JSON.stringify(everything)}, "stdio"]\n`,
  );
  const modes = [
    { mode: 'search', args: ['--config', search, '--store', 'memory:'], ready: /connected 1 of 1 servers/ },
    { mode: 'transparent', args: ['--config', transparent], ready: /serving command/ },
  ];
  const figures = [];
  for (const { mode, args, ready } of modes) {
    const times: number[] = [];
    const codes = new Set<number | null>();
    for (let run = 0; run < runs; run++) {
      const { child } = await startProcess(['bin/extensible-mcp.mjs', ...args], ready);
      // The session is open (a transparent proxy opens its upstream at initialize) before the hang-up.
      const answered = new Promise<void>((resolve) => {
        let seen = '';
        child.stdout?.on('data', (chunk: Buffer) => {
          seen += chunk.toString();
          if (seen.includes('"id":1')) resolve();
        });
      });
      child.stdin?.write(initialize);
      await answered;
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      const start = process.hrtime.bigint();
      child.stdin?.end();
      codes.add(await exited);
      times.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
    const sorted = [...times].sort((a, b) => a - b);
    figures.push({
      mode,
      runs,
      exitCodes: [...codes],
      medianMs: Math.round(sorted[Math.floor(sorted.length / 2)] ?? 0),
      worstMs: Math.round(sorted.at(-1) ?? 0),
    });
  }
  return figures;
}
