import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import type { Tool } from '@modelcontextprotocol/server';
import { InMemoryTransport, Server } from '@modelcontextprotocol/server';
import { createGateway, type DownstreamSpec, type Embedder, loadMiniLm } from '../../proxy/index';
import { loadEmbedder, mpnetModel } from '../../proxy/search/embedder';
import { createFixtureServer } from '../fixtures/fixture-server';
import { connectClient } from '../proxy/helpers';
import { loadCorpus, loadQueries } from '../retrieval/evaluate-retrieval';
import { identityBench } from './identity-bench';
import { type Latency, measure, measureInterleaved } from './measure';
import { allowanceBench, paymentsBench } from './payments-bench';
import { pinsBench } from './pins-bench';
import { policyBench } from './policy-bench';
import { replicasBench } from './replicas-bench';
import { queryEmbeddingLatency, retrievalFigures, startupFigures } from './search-bench';
import { takeoverBench } from './takeover-bench';
import { httpThroughput, idleSessionsMemory, statelessRequestsMemory, stdioShutdown } from './transport-bench';

// `npm run bench`: every performance figure of the project, as one JSON document on stdout,
// comparisons side by side in one run. Progress goes to stderr.
const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
const quiet = { info: () => undefined, error: (line: string) => log(line) };
const modelDir = resolve('.models');
/** The quality tier runs only where `npm run model:stage-mpnet` staged its larger model. */
const qualityTierStaged = existsSync(join(modelDir, mpnetModel, 'onnx', 'model_quantized.onnx'));

/**
 * The 1 000- and 10 000-tool indexes are the real corpus copied under numbered server names
 * (`github7__create_issue`). Copies differ from their original only in that number, so this
 * embedder embeds each original text once and reuses its vector for the copies: only search
 * latency is measured at those sizes, and it does not depend on the vectors' values.
 */
/** A tool's index text starts with its qualified name; copies carry a number after the server. */
const toolText = /^([a-z_-]+?)\d*__/;

function copyAwareEmbedder(base: Promise<Embedder | undefined>): Promise<Embedder | undefined> {
  const cache = new Map<string, Float32Array>();
  return base.then(
    (embedder) =>
      embedder && {
        model: embedder.model,
        ...(embedder.similarities && { similarities: embedder.similarities.bind(embedder) }),
        async embed(texts) {
          // Queries are never cached: every search pays for its own query embedding.
          if (!texts.every((text) => toolText.test(text))) return embedder.embed(texts);
          const originals = texts.map((text) => text.replace(toolText, '$1__'));
          const missing = [...new Set(originals.filter((text) => !cache.has(text)))];
          const vectors = await embedder.embed(missing);
          missing.forEach((text, position) => {
            const vector = vectors[position];
            if (vector) cache.set(text, vector);
          });
          return originals.map((text) => cache.get(text) ?? new Float32Array());
        },
      },
  );
}

/** An in-process MCP server that only lists `tools`: the gateway indexes it like any downstream. */
function listingServer(tools: readonly Tool[]): Server {
  const server = new Server({ name: 'listing', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler('tools/list', () => ({ tools: [...tools] }));
  return server;
}

async function searchLatency(
  embedder: Promise<Embedder | undefined> | undefined,
  toolCount: number,
): Promise<Latency & { mode: string; tools: number }> {
  const corpus = loadCorpus();
  // Scale the real corpus to exactly `toolCount` tools by copying it under numbered server names.
  const servers = new Map<string, Tool[]>();
  for (let copy = 0, count = 0; count < toolCount; copy++) {
    for (const tool of corpus.slice(0, toolCount - count)) {
      const server = copy === 0 ? tool.server : `${tool.server}${copy}`;
      const { description, inputSchema } = tool;
      const tools = servers.get(server) ?? [];
      servers.set(server, tools);
      tools.push({ name: tool.name, description, inputSchema });
      count++;
    }
  }
  const proxy = createGateway({
    embeddings: embedder ? { embedder } : false,
    logger: quiet,
    servers: Object.fromEntries(
      [...servers].map(([name, tools]) => [name, { kind: 'in-process', server: listingServer(tools) } as const]),
    ),
  });
  await proxy.start();
  const mode = await proxy.ready();
  const client = await connectClient(proxy);
  const queries = loadQueries().map((query) => query.query);
  const latency = await measure(
    (iteration) => client.callTool({ name: 'search_tools', arguments: { query: queries[iteration % queries.length] } }),
    {
      iterations: queries.length,
      warmup: 5,
    },
  );
  await client.close();
  await proxy.close();
  return { mode, tools: toolCount, ...latency };
}

async function callOverhead(kind: 'in-memory' | 'stdio', iterations: number) {
  const stdio: DownstreamSpec = {
    kind: 'stdio',
    command: process.execPath,
    args: ['--import', 'tsx', 'tests/fixtures/stdio-fixture-server.ts'],
  };
  // Direct: a client talking to the downstream itself.
  const direct = new Client({ name: 'bench-direct', version: '1' });
  if (kind === 'in-memory') {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await createFixtureServer().connect(serverSide);
    await direct.connect(clientSide);
  } else {
    await direct.connect(
      new StdioClientTransport({ command: stdio.command, args: [...(stdio.args ?? [])], stderr: 'ignore' }),
    );
  }
  // Proxied: a client talking to the proxy, which calls the same kind of downstream.
  const proxy = createGateway({
    embeddings: false,
    logger: quiet,
    servers: { fixture: kind === 'in-memory' ? { kind: 'in-process', server: createFixtureServer() } : stdio },
  });
  await proxy.start();
  const client = await connectClient(proxy);
  await client.callTool({ name: 'search_tools', arguments: { query: 'echoes back the message' } });
  const arguments_ = { message: 'benchmark' };
  // Direct and proxied calls alternate, so both see the same machine.
  const { direct: directLatency, proxied: proxiedLatency } = await measureInterleaved(
    {
      direct: () => direct.callTool({ name: 'echo', arguments: arguments_ }),
      proxied: () =>
        client.callTool({ name: 'call_tool', arguments: { tool_name: 'fixture__echo', arguments: arguments_ } }),
    },
    { iterations, warmup: 200 },
  );
  await Promise.all([direct.close(), client.close()]);
  await proxy.close();
  return {
    downstream: kind,
    direct: directLatency,
    proxied: proxiedLatency,
    addedP50Us: Math.round((proxiedLatency.p50Us - directLatency.p50Us) * 10) / 10,
    addedP95Us: Math.round((proxiedLatency.p95Us - directLatency.p95Us) * 10) / 10,
  };
}

/** `npm run bench -- --only=search,calls` runs a subset; the default is everything. */
const only = process.argv
  .find((arg) => arg.startsWith('--only='))
  ?.slice('--only='.length)
  .split(',');
const wanted = (
  part:
    | 'retrieval'
    | 'search'
    | 'calls'
    | 'pins'
    | 'policy'
    | 'identity'
    | 'payments'
    | 'allowance'
    | 'takeover'
    | 'transport'
    | 'replicas',
) => only === undefined || only.includes(part);

async function main() {
  const queries = loadQueries().map((query) => query.query);
  const model = loadMiniLm({ modelDir, allowRemote: false, log });
  const embedder = copyAwareEmbedder(model);
  const loaded = await model;
  const hybridAvailable = loaded !== undefined;
  if (!hybridAvailable) log('no staged model: hybrid figures are skipped (run `npm run model:stage`)');
  const tier = qualityTierStaged ? loadEmbedder({ model: 'mpnet', modelDir, allowRemote: false, log }) : undefined;
  if (!qualityTierStaged) log('quality tier (mpnet) not staged: its figures are skipped (`npm run model:stage-mpnet`)');

  // Quality on the original fixture and both halves of the unseen set, for each ranking.
  log('retrieval quality');
  const retrieval = wanted('retrieval')
    ? {
        lexical: await retrievalFigures(undefined),
        ...(hybridAvailable && { hybrid: await retrievalFigures(model) }),
        ...(tier && { 'hybrid-mpnet': await retrievalFigures(tier) }),
      }
    : undefined;

  // What one query embedding costs on its own: the floor under every hybrid search figure.
  const tierLoaded = await tier;
  const queryEmbedding =
    loaded && wanted('search')
      ? {
          minilm: await queryEmbeddingLatency(loaded, queries),
          ...(tierLoaded && { mpnet: await queryEmbeddingLatency(tierLoaded, queries) }),
        }
      : undefined;

  const search: (Latency & { ranking: string; tools: number })[] = [];
  for (const tools of wanted('search') ? [100, 1_000, 10_000] : []) {
    log(`search_tools latency at ${tools} tools`);
    search.push({ ranking: 'lexical', ...(await searchLatency(undefined, tools)) });
    if (hybridAvailable) search.push({ ranking: 'hybrid', ...(await searchLatency(embedder, tools)) });
  }
  // The quality tier beside the default at the largest size.
  if (tierLoaded && wanted('search')) {
    log('search_tools latency at 10000 tools, quality tier');
    search.push({
      ranking: 'hybrid-mpnet',
      ...(await searchLatency(copyAwareEmbedder(Promise.resolve(tierLoaded)), 10_000)),
    });
  }
  await tierLoaded?.close?.();

  // Cold indexing and warm restart over 500 real tools, each tier with an empty vector cache first.
  log('start-up: cold indexing and warm restart of 500 tools');
  const startup =
    hybridAvailable && wanted('search')
      ? [
          await startupFigures({ modelDir, model: 'minilm' }),
          ...(qualityTierStaged ? [await startupFigures({ modelDir, model: 'mpnet' })] : []),
        ]
      : [];

  log('call_tool overhead');
  const calls = wanted('calls') ? [await callOverhead('in-memory', 3_000), await callOverhead('stdio', 1_000)] : [];
  const inMemory = calls[0];

  log('transport: Streamable HTTP throughput (10 clients, each protocol version), memory, stdio shutdown');
  const throughput = { clients: 10, perClient: 100, rounds: 3 };
  const transport = wanted('transport')
    ? {
        http: [
          await httpThroughput({ protocol: '2025-11-25', ...throughput }),
          await httpThroughput({ protocol: '2026-07-28', ...throughput }),
        ],
        stdioShutdown: await stdioShutdown(5),
        idleSessions: await idleSessionsMemory(10_000),
        statelessRequests: await statelessRequestsMemory(100_000),
      }
    : undefined;

  log('pins: re-checking 10 000 pinned tools at a re-listing');
  const pins = wanted('pins') ? await pinsBench() : undefined;

  log('policy evaluation');
  const policy = wanted('policy') ? await policyBench() : undefined;

  log('identity: issue and verify an OrderApproval');
  const identity = wanted('identity') ? await identityBench() : undefined;

  log('payments: the gated charge decision and the whole order');
  const payments = wanted('payments') ? await paymentsBench() : undefined;

  log('allowance: the gated decision with a standing allowance in place of the parent approval');
  const allowance = wanted('allowance') ? await allowanceBench() : undefined;

  log('takeover: a chat turn whose instance was killed, finished by another');
  const takeover = wanted('takeover') ? await takeoverBench(3) : undefined;

  log('replicas: calls/s through two proxy replicas on one PostgreSQL database vs one');
  const replicas = wanted('replicas') ? await replicasBench(throughput) : undefined;

  const hybridAt10k = search.find((entry) => entry.ranking === 'hybrid' && entry.tools >= 10_000);
  const result = {
    machine: { node: process.version, platform: `${process.platform}-${process.arch}`, cpus: availableParallelism() },
    retrieval,
    queryEmbedding,
    searchTools: search,
    searchStartup: startup,
    callToolOverhead: calls,
    transport,
    pins,
    policy,
    identity,
    payments,
    allowance,
    takeover,
    replicas,
    targets: {
      'call_tool added p50 <= 30 us (in-memory)': inMemory && {
        value: inMemory.addedP50Us,
        met: inMemory.addedP50Us <= 30,
      },
      ...Object.fromEntries(
        (transport?.http ?? []).flatMap((figure) => [
          [
            `HTTP proxied >= 60 % of direct calls/s (10 clients, ${figure.protocol})`,
            { value: figure.ratio, met: figure.ratio >= 0.6 },
          ],
          [
            `HTTP added p99 <= 10 ms (10 clients, ${figure.protocol})`,
            { value: figure.addedP99Us, met: figure.addedP99Us <= 10_000 },
          ],
        ]),
      ),
      'stdio shutdown < 2 s after end of input (worst of 5, both modes)': transport && {
        value: Math.max(...transport.stdioShutdown.map((figure) => figure.worstMs)),
        met: transport.stdioShutdown.every((figure) => figure.worstMs < 2_000 && figure.exitCodes.join() === '0'),
      },
      [`two proxy replicas >= 1.6x one replica's calls/s (goal on >= 4 cores; ${availableParallelism()} here)`]:
        replicas && { value: replicas.ratio, met: replicas.ratio >= 1.6 },
      'hybrid search_tools p95 <= 25 ms at 10 000 tools': hybridAt10k && {
        value: hybridAt10k.p95Us,
        met: hybridAt10k.p95Us <= 25_000,
      },
      'hybrid recall@5 >= 0.9 (original fixture)': retrieval?.hybrid?.fixture && {
        value: retrieval.hybrid.fixture.recallAt5,
        met: retrieval.hybrid.fixture.recallAt5 >= 0.9,
      },
      'hybrid held-out recall@5 >= 0.90': retrieval?.hybrid?.heldOut && {
        value: retrieval.hybrid.heldOut.recallAt5,
        met: retrieval.hybrid.heldOut.recallAt5 >= 0.9,
      },
      'hybrid held-out recall@1 >= 0.70': retrieval?.hybrid?.heldOut && {
        value: retrieval.hybrid.heldOut.recallAt1,
        met: retrieval.hybrid.heldOut.recallAt1 >= 0.7,
      },
    },
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}

await main();
