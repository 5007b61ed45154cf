import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { clientsOf, load, searchedCall, startDownstream, startProxy, stop } from './transport-bench';

/**
 * A CPU profile of the proxy under the transport bench's 2026-07-28 load (issue 31): 10 v2
 * clients pinned to 2026-07-28 calling `fixture__echo` through `--http` search mode in front of
 * the 2026 downstream, the proxy under `node --cpu-prof`. Prints the profile's path; read it with
 * `hot-frames.ts`. `npx tsx tests/bench/profile-http-proxy.ts [--calls 300] [--dir DIR]`.
 */
const { values } = parseArgs({ options: { calls: { type: 'string' }, dir: { type: 'string' } } });
const directory = values.dir ?? (await mkdtemp(join(tmpdir(), 'proxy-profile-')));
const downstream = await startDownstream('2026-07-28');
const proxy = await startProxy(downstream.url, ['--cpu-prof', `--cpu-prof-dir=${directory}`]);
const clients = await clientsOf(proxy.url, 10, '2026-07-28');
const callArguments = new Map(
  await Promise.all(clients.map(async (client) => [client, await searchedCall(client)] as const)),
);
const figures = await load(clients, Number(values.calls ?? 300), (client) =>
  client.callTool({ name: 'call_tool', arguments: callArguments.get(client) ?? {} }),
);
await Promise.allSettled(clients.map((client) => client.close()));
await Promise.all([stop(proxy.child), stop(downstream.child)]);
process.stdout.write(`${JSON.stringify(figures)}\nprofile in ${directory}\n`);
