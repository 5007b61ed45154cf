import { mkdtemp } from 'node:fs/promises';
import { createServer, request as forward, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/client';
import pg from 'pg';
import { startThrowawayPostgres } from '../support/throwaway-postgres';
import { clusterCpuSeconds, type Latency, statFields } from './measure';
import { clientsOf, cpuSeconds, load, searchedCall, startDownstream, startProxy, stop } from './transport-bench';

/**
 * Issue 28: calls/s through two proxy CLI replicas against one, both on one PostgreSQL database
 * (discovery scopes and single-use evidence shared, one request-state key file), behind a
 * round-robin of the bench's own. 2026-07-28 clients, so each call's scope is read from the
 * database by whichever replica serves it. Both arms go through the same round-robin (one backend,
 * or both), measured rounds alternate, and each process's CPU time is reported beside the figure:
 * on 2 cores the downstream, the replicas, PostgreSQL and the clients share the same two cores.
 */

/** A loopback round-robin in this process: each request goes to the next of `backends` (mutable between rounds). */
async function roundRobin(): Promise<{ url: string; backends: URL[]; server: Server }> {
  const backends: URL[] = [];
  let next = 0;
  const server = createServer((incoming, outgoing) => {
    const backend = backends[next++ % backends.length];
    if (backend === undefined) return void outgoing.writeHead(503).end();
    const upstream = forward(
      backend,
      { method: incoming.method, headers: { ...incoming.headers, host: backend.host } },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    upstream.on('error', () => outgoing.destroy());
    incoming.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/mcp`, backends, server };
}

const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const round1 = (value: number) => Math.round(value * 10) / 10;

/** calls/s through one replica and through two, side by side, with every process's CPU time per arm. */
export async function replicasBench(options: { clients: number; perClient: number; rounds: number }) {
  const cluster = startThrowawayPostgres({ durable: true });
  const started: Awaited<ReturnType<typeof startProxy>>[] = [];
  let downstream: Awaited<ReturnType<typeof startDownstream>> | undefined;
  let balancer: Awaited<ReturnType<typeof roundRobin>> | undefined;
  let clients: Client[] = [];
  try {
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    await admin.query('CREATE DATABASE replicas');
    const backend = await admin.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    // Every backend is the postmaster's child: field 4 of its stat is the postmaster's pid.
    const postmasterPid = Number(statFields(backend.rows[0]?.pid ?? 0)[1]);
    await admin.end();
    const url = new URL(cluster.url);
    url.pathname = '/replicas';
    const folder = await mkdtemp(join(tmpdir(), 'bench-replicas-'));
    const storeFlags = ['--store', url.toString(), '--state-key', join(folder, 'state.key')];
    downstream = await startDownstream('2026-07-28');
    // One after the other: the first makes the key file and migrates, the second finds both.
    started.push(await startProxy(downstream.url, [], storeFlags));
    started.push(await startProxy(downstream.url, [], storeFlags));
    const replicas = started.map((replica) => ({ ...replica, backend: new URL(replica.url) }));
    balancer = await roundRobin();
    balancer.backends.push(...replicas.map((replica) => replica.backend));
    clients = await clientsOf(balancer.url, options.clients, '2026-07-28');
    const callArguments = new Map(
      await Promise.all(clients.map(async (client) => [client, await searchedCall(client)] as const)),
    );
    const call = (client: Client) => client.callTool({ name: 'call_tool', arguments: callArguments.get(client) ?? {} });
    const arms = { oneReplica: replicas.slice(0, 1), twoReplicas: replicas };
    type Measured = { callsPerSecond: number; latency: Latency; cpu: Record<string, number> };
    const measured: Record<keyof typeof arms, Measured[]> = { oneReplica: [], twoReplicas: [] };
    const cpuNow = (): Record<string, number> => ({
      replicaA: cpuSeconds(replicas[0]?.child.pid),
      replicaB: cpuSeconds(replicas[1]?.child.pid),
      downstream: cpuSeconds(downstream?.child.pid),
      postgres: clusterCpuSeconds(postmasterPid),
      clientsAndBalancer: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
    });
    for (const backends of Object.values(arms)) {
      balancer.backends.splice(0, Infinity, ...backends.map((replica) => replica.backend));
      await load(clients, 20, call);
    }
    for (let round = 0; round < options.rounds; round++) {
      for (const [name, backends] of Object.entries(arms) as [keyof typeof arms, typeof replicas][]) {
        balancer.backends.splice(0, Infinity, ...backends.map((replica) => replica.backend));
        const before = cpuNow();
        const figures = await load(clients, options.perClient, call);
        const after = cpuNow();
        const cpu = Object.fromEntries(Object.keys(after).map((key) => [key, (after[key] ?? 0) - (before[key] ?? 0)]));
        measured[name].push({ ...figures, cpu });
      }
    }
    const summary = (list: readonly Measured[]) => ({
      callsPerSecond: median(list.map((figure) => figure.callsPerSecond)),
      p50Us: median(list.map((figure) => figure.latency.p50Us)),
      p99Us: median(list.map((figure) => figure.latency.p99Us)),
      cpuSeconds: Object.fromEntries(
        Object.keys(list[0]?.cpu ?? {}).map((key) => [
          key,
          round1(list.reduce((sum, f) => sum + (f.cpu[key] ?? 0), 0)),
        ]),
      ),
    });
    const one = summary(measured.oneReplica);
    const two = summary(measured.twoReplicas);
    return {
      protocol: '2026-07-28 stateless',
      store: 'PostgreSQL (throwaway cluster on this machine, defaults, unix socket)',
      cores: cpus().length,
      clients: options.clients,
      callsPerRound: options.clients * options.perClient,
      rounds: options.rounds,
      oneReplica: one,
      twoReplicas: two,
      /** Two replicas' calls/s over one's: the goal's figure (≥ 1.6 on at least 4 cores). */
      ratio: Math.round((two.callsPerSecond / one.callsPerSecond) * 1000) / 1000,
    };
  } finally {
    await Promise.allSettled(clients.map((client) => client.close()));
    balancer?.server.close();
    await Promise.allSettled([...started.map((replica) => stop(replica.child)), downstream && stop(downstream.child)]);
    cluster.stop();
  }
}
