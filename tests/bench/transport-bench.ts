import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { freePort } from '../e2e/support/app-server';
import { type Latency, summarise } from './measure';

/**
 * Transport figures (issue 31): Streamable HTTP throughput with concurrent clients of each
 * protocol version (2025-11-25 sessions, 2026-07-28 stateless), proxied against direct to the
 * same server and against the cheapest SDK forwarder, with each process's CPU time beside it; the
 * proxy's resident memory with idle 2025 sessions and after many stateless requests; and how long
 * an orderly stdio shutdown takes. Every server is a real process on loopback.
 */

const offline = { ...process.env, EXTENSIBLE_MCP_OFFLINE: '1', EXTENSIBLE_MCP_MODEL_DIR: join(tmpdir(), 'no-model') };

/** CPU seconds (user + system) a process has used so far, read from /proc. */
export function cpuSeconds(pid: number | undefined): number {
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

/** Sends SIGTERM and waits for the exit (an orderly one for the proxy, so a `--cpu-prof` profile is written). */
export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/** Every client calls `call` `perClient` times in a loop, all at once: calls/s and latency. */
export async function load(
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

/** The two protocol versions the HTTP benches drive, each end to end: clients, proxy and downstream. */
export type BenchProtocol = '2025-11-25' | '2026-07-28';

/** The fixture downstream of `protocol` (2025 sessions, or 2026-07-28 only) as a process on loopback. */
export async function startDownstream(protocol: BenchProtocol) {
  const entry = protocol === '2025-11-25' ? 'examples/http-fixture-server.ts' : 'tests/bench/modern-downstream.ts';
  const { child, match } = await startProcess(
    ['--import', 'tsx', entry, String(await freePort())],
    /fixture MCP server at (\S+)/,
  );
  return { child, url: match[1] ?? '' };
}

/**
 * The proxy's CLI in search mode over `--http` (lexical, a memory store unless `storeFlags` name
 * another) in front of `downstreamUrl`; `nodeArgs` go to Node before the CLI (`--cpu-prof`).
 */
export async function startProxy(
  downstreamUrl: string,
  nodeArgs: readonly string[] = [],
  storeFlags: readonly string[] = ['--store', 'memory:'],
) {
  const folder = await mkdtemp(join(tmpdir(), 'bench-http-'));
  const config = join(folder, 'config.json');
  await writeFile(config, JSON.stringify({ mcpServers: { fixture: { url: downstreamUrl } } }));
  const { child, match } = await startProcess(
    [...nodeArgs, 'bin/extensible-mcp.mjs', '--config', config, '--http', '--port', '0', ...storeFlags],
    /serving Streamable HTTP at (\S+)/,
  );
  return { child, url: match[1] ?? '' };
}

/** One downstream, and the proxy and the floor forwarder in front of it. */
async function startHttpStack(protocol: BenchProtocol) {
  const downstream = await startDownstream(protocol);
  const proxy = await startProxy(downstream.url);
  const { child, match } = await startProcess(
    ['--import', 'tsx', 'tests/bench/floor-forwarder.ts', downstream.url, protocol],
    /floor forwarder at (\S+)/,
  );
  return {
    downstream,
    proxy,
    floor: { child, url: match[1] ?? '' },
    stop: () => Promise.all([stop(proxy.child), stop(child), stop(downstream.child)]),
  };
}

/** `count` real v2 SDK clients at `url`: 2025 sessions (the client's default handshake), or pinned to 2026-07-28. */
export async function clientsOf(url: string, count: number, protocol: BenchProtocol): Promise<Client[]> {
  return Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const client = new Client(
        { name: `bench-${index}`, version: '1' },
        protocol === '2026-07-28' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {},
      );
      await client.connect(new StreamableHTTPClientTransport(new URL(url)));
      return client;
    }),
  );
}

/** Each proxied client's `call_tool` arguments after its one search (a 2026 client carries the handle it got). */
export async function searchedCall(client: Client): Promise<Record<string, unknown>> {
  const found = await client.callTool({ name: 'search_tools', arguments: { query: 'echo the message back' } });
  const handle = (found.structuredContent as { handle?: string } | undefined)?.handle;
  return { tool_name: 'fixture__echo', arguments: { message: 'benchmark' }, ...(handle && { handle }) };
}

const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const round1 = (value: number) => Math.round(value * 10) / 10;

/**
 * Streamable HTTP with `clients` concurrent clients of one protocol version, three ways to the
 * same downstream process: directly, through the floor forwarder (the cheapest SDK hop, see
 * `floor-forwarder.ts`), and through the proxy's CLI (`--http`, search mode, lexical). Measured
 * rounds alternate direct, floor, proxied, so drift in the machine's load hits all three alike;
 * each figure is the median over rounds. CPU is each process's own during its path's rounds.
 */
export async function httpThroughput(options: {
  protocol: BenchProtocol;
  clients: number;
  perClient: number;
  rounds: number;
}) {
  const { protocol } = options;
  const stack = await startHttpStack(protocol);
  const message = { message: 'benchmark' };
  const direct = await clientsOf(stack.downstream.url, options.clients, protocol);
  const floor = await clientsOf(stack.floor.url, options.clients, protocol);
  const proxied = await clientsOf(stack.proxy.url, options.clients, protocol);
  const callArguments = new Map(
    await Promise.all(proxied.map(async (client) => [client, await searchedCall(client)] as const)),
  );
  const echo = (client: Client) => client.callTool({ name: 'echo', arguments: message });
  const paths = {
    direct: { clients: direct, call: echo, process: undefined },
    floor: { clients: floor, call: echo, process: stack.floor.child },
    proxied: {
      clients: proxied,
      call: (client: Client) => client.callTool({ name: 'call_tool', arguments: callArguments.get(client) ?? {} }),
      process: stack.proxy.child,
    },
  };
  const names = ['direct', 'floor', 'proxied'] as const;
  // Warm every path, then alternate measured rounds.
  for (const name of names) await load(paths[name].clients, 20, paths[name].call);
  const measured = { direct: [] as Measured[], floor: [] as Measured[], proxied: [] as Measured[] };
  for (let round = 0; round < options.rounds; round++) {
    for (const name of names) {
      const path = paths[name];
      const before = { downstream: cpuSeconds(stack.downstream.child.pid), hop: cpuSeconds(path.process?.pid) };
      const figures = await load(path.clients, options.perClient, path.call);
      measured[name].push({
        ...figures,
        downstreamCpu: cpuSeconds(stack.downstream.child.pid) - before.downstream,
        hopCpu: cpuSeconds(path.process?.pid) - before.hop,
      });
    }
  }
  await Promise.allSettled([...direct, ...floor, ...proxied].map((client) => client.close()));
  await stack.stop();
  const calls = options.clients * options.perClient * options.rounds;
  const summary = (list: readonly Measured[]) => ({
    callsPerSecond: median(list.map((figure) => figure.callsPerSecond)),
    p50Us: median(list.map((figure) => figure.latency.p50Us)),
    p99Us: median(list.map((figure) => figure.latency.p99Us)),
  });
  const cpu = (list: readonly Measured[], key: 'downstreamCpu' | 'hopCpu') =>
    list.reduce((sum, figure) => sum + figure[key], 0);
  const perCall = (seconds: number) => Math.round((seconds / calls) * 1e6);
  const [viaDirect, viaFloor, viaProxy] = [
    summary(measured.direct),
    summary(measured.floor),
    summary(measured.proxied),
  ];
  const ratio = (over: { callsPerSecond: number }, under: { callsPerSecond: number }) =>
    Math.round((over.callsPerSecond / under.callsPerSecond) * 1000) / 1000;
  const cpuTotals = {
    directServer: round1(cpu(measured.direct, 'downstreamCpu')),
    floorServer: round1(cpu(measured.floor, 'downstreamCpu')),
    floor: round1(cpu(measured.floor, 'hopCpu')),
    proxiedServer: round1(cpu(measured.proxied, 'downstreamCpu')),
    proxy: round1(cpu(measured.proxied, 'hopCpu')),
  };
  return {
    protocol: protocol === '2025-11-25' ? '2025-11-25 sessions' : '2026-07-28 stateless',
    clients: options.clients,
    callsPerRound: options.clients * options.perClient,
    rounds: options.rounds,
    direct: viaDirect,
    floor: viaFloor,
    proxied: viaProxy,
    /** Proxied calls/s over direct: the goal's figure. */
    ratio: ratio(viaProxy, viaDirect),
    /** The floor's calls/s over direct: the most any forwarder built on the SDK reaches here. */
    floorRatio: ratio(viaFloor, viaDirect),
    /** Proxied calls/s over the floor's: what the proxy's own work costs beyond one SDK hop. */
    ratioToFloor: ratio(viaProxy, viaFloor),
    addedP50Us: round1(viaProxy.p50Us - viaDirect.p50Us),
    addedP99Us: round1(viaProxy.p99Us - viaDirect.p99Us),
    floorAddedP50Us: round1(viaFloor.p50Us - viaDirect.p50Us),
    floorAddedP99Us: round1(viaFloor.p99Us - viaDirect.p99Us),
    cpuSeconds: cpuTotals,
    cpuMicrosecondsPerCall: {
      directServer: perCall(cpu(measured.direct, 'downstreamCpu')),
      floorServer: perCall(cpu(measured.floor, 'downstreamCpu')),
      floor: perCall(cpu(measured.floor, 'hopCpu')),
      proxiedServer: perCall(cpu(measured.proxied, 'downstreamCpu')),
      proxy: perCall(cpu(measured.proxied, 'hopCpu')),
    },
  };
}

/** One measured round of one path. */
interface Measured {
  readonly callsPerSecond: number;
  readonly latency: Latency;
  readonly downstreamCpu: number;
  readonly hopCpu: number;
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
  let first = '';
  for (let index = 0; index < count; index++) {
    const opened = await fetch(url, { method: 'POST', headers, body: initialize });
    await opened.text();
    const session = opened.headers.get('mcp-session-id') ?? '';
    if (index === 0) first = session;
    const ready = await fetch(url, {
      method: 'POST',
      headers: { ...headers, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    await ready.text();
  }
  const after = rssMiB(proxy.child.pid);
  // The first session must still be open: had a cap closed it, the figure would not be `count` sessions.
  const probe = await fetch(url, {
    method: 'POST',
    headers: { ...headers, 'mcp-session-id': first, 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }),
  });
  await probe.text();
  await stop(proxy.child);
  return {
    sessions: count,
    firstSessionStillOpen: probe.ok,
    rssBeforeMiB: before,
    rssAfterMiB: after,
    kibPerSession: Math.round(((after - before) * 1024) / count),
  };
}

/**
 * The proxy's resident memory before and after `count` 2026-07-28 requests, `concurrency` at a
 * time, in front of the 2026 downstream: each a `call_tool` of `fixture__echo`, byte for byte as a
 * v2 client sent it once (recorded from its fetch, with the handle its search returned), replayed
 * with `fetch` so the bench's own client costs little. Nothing is kept between stateless requests,
 * so the figure should not grow with `count`.
 */
export async function statelessRequestsMemory(count: number, concurrency = 10) {
  const downstream = await startDownstream('2026-07-28');
  const proxy = await startProxy(downstream.url);
  let recorded: { headers: Headers; body: string } | undefined;
  const client = new Client(
    { name: 'bench-rss', version: '1' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(proxy.url), {
      fetch: (input, init) => {
        if (typeof init?.body === 'string' && init.body.includes('"call_tool"')) {
          recorded = { headers: new Headers(init.headers), body: init.body };
        }
        return fetch(input, init);
      },
    }),
  );
  const result = await client.callTool({ name: 'call_tool', arguments: await searchedCall(client) });
  await client.close();
  if (recorded === undefined || result.isError) throw new Error('the recorded call_tool did not succeed');
  const request = recorded;
  const before = rssMiB(proxy.child.pid);
  // RSS at each quarter, so steady growth (a leak) can be told from a heap that settles.
  const quarters: number[] = [];
  let sent = 0;
  let failed = 0;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (sent < count) {
        sent++;
        if (sent % Math.ceil(count / 4) === 0) quarters.push(rssMiB(proxy.child.pid));
        const answer = await fetch(proxy.url, { method: 'POST', headers: request.headers, body: request.body });
        const text = await answer.text();
        if (!answer.ok || !text.includes('echo: benchmark')) failed++;
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const after = rssMiB(proxy.child.pid);
  await Promise.all([stop(proxy.child), stop(downstream.child)]);
  return {
    requests: count,
    concurrency,
    failed,
    requestsPerSecond: Math.round(count / seconds),
    rssBeforeMiB: before,
    rssAtQuartersMiB: quarters,
    rssAfterMiB: after,
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
