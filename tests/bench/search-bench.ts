import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Embedder, loadEmbedder, type SearchModel } from '../../proxy/search/embedder';
import { ToolIndex } from '../../proxy/search/tool-index';
import {
  type CorpusTool,
  corpusFor,
  evaluateAll,
  hasUnseenSet,
  indexTools,
  type RetrievalQuality,
} from '../retrieval/evaluate-retrieval';
import { type Latency, measure } from './measure';

/** Retrieval figures without the list of misses (their count only). */
type QualityFigures = Omit<RetrievalQuality, 'misses'> & { readonly misses: number };

const figures = (quality: RetrievalQuality | undefined): QualityFigures | undefined =>
  quality && { ...quality, misses: quality.misses.length };

/**
 * recall@1/@5 and MRR on the original fixture and on both halves of the unseen set (SPEC §13,
 * issue 17), for one ranking: lexical (no embedder) or a loaded tier.
 */
export async function retrievalFigures(embedder: Promise<Embedder | undefined> | undefined) {
  const quality = await evaluateAll(embedder ? { embedder } : {});
  return {
    fixture: figures(quality.fixture),
    ...(quality.tuning && { tuning: figures(quality.tuning) }),
    ...(quality.heldOut && { heldOut: figures(quality.heldOut) }),
  };
}

/** `count` real tools: the original and unseen corpora, in order (the original alone when the unseen set is absent). */
function realTools(count: number): CorpusTool[] {
  const tools = corpusFor(hasUnseenSet() ? 'unseen' : 'fixture');
  // Without the unseen set there are fewer than 500 real tools: the rest are copies under
  // numbered server names, which are different texts and are embedded like new tools.
  const result: CorpusTool[] = [];
  for (let copy = 0; result.length < count; copy++) {
    for (const tool of tools.slice(0, count - result.length)) {
      result.push(copy === 0 ? tool : { ...tool, server: `${tool.server}${copy}` });
    }
  }
  return result;
}

/** Milliseconds since `start` (from `performance.now()`), one decimal. */
const since = (start: number) => Math.round((performance.now() - start) * 10) / 10;

/**
 * Start-up of a tier over 500 real tools (issue 17): a cold start (empty vector cache: the
 * model loads, then every tool is embedded) and a warm restart over the same tools (the model
 * loads, every vector comes from the cache). Each figure runs from creating the index to the
 * index answering in hybrid mode; `modelLoadMs` is the model's share of it.
 */
export async function startupFigures(options: { modelDir: string; model: SearchModel; tools?: number }) {
  const tools = realTools(options.tools ?? 500);
  const cacheDir = await mkdtemp(join(tmpdir(), 'search-bench-'));
  const run = async () => {
    const start = performance.now();
    let loadedAt = start;
    const embedder = loadEmbedder({
      model: options.model,
      modelDir: options.modelDir,
      allowRemote: false,
      log: () => undefined,
      cacheDir,
    }).then((loaded) => {
      loadedAt = performance.now();
      return loaded;
    });
    const index = new ToolIndex(embedder);
    indexTools(index, tools);
    const mode = await index.settled();
    const readyMs = since(start);
    await (await embedder)?.close?.();
    return { mode, modelLoadMs: Math.round((loadedAt - start) * 10) / 10, readyMs };
  };
  try {
    const cold = await run();
    const warm = await run();
    return { model: options.model, tools: tools.length, cold, warm };
  } finally {
    await rm(cacheDir, { recursive: true, force: true });
  }
}

/** What embedding one query costs on its own with `embedder`: the floor under every hybrid search. */
export function queryEmbeddingLatency(embedder: Embedder, queries: readonly string[]): Promise<Latency> {
  return measure((iteration) => embedder.embed([queries[iteration % queries.length] ?? '']), {
    iterations: queries.length,
    warmup: 5,
  });
}
