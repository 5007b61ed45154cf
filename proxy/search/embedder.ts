import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { VectorCache } from './vector-cache';

/** Turns texts into unit-length sentence embeddings. */
export interface Embedder {
  /** The model's name, for log lines and benchmark output. */
  readonly model: string;
  /** Embeds queries (never cached on disk: they are the user's words). */
  embed(texts: readonly string[]): Promise<Float32Array[]>;
  /**
   * Optional: embeds tool texts, possibly from a persistent cache ({@link withVectorCache}).
   * The index uses it for tools when present, and `embed` otherwise.
   */
  embedDocuments?(texts: readonly string[]): Promise<Float32Array[]>;
  /**
   * Optional fast path: the dot product of `query` with every row of a row-major `matrix`, on
   * the model's own runtime (SIMD). Without it the index computes them in JavaScript.
   */
  similarities?(matrix: Float32Array, query: Float32Array): Promise<Float32Array>;
  /** Releases the model (stops its thread). */
  close?(): Promise<void>;
}

/** Where and how to load all-MiniLM-L6-v2. */
export interface MiniLmOptions {
  /** Folder holding `Xenova/all-MiniLM-L6-v2/` (see `npm run model:stage`). */
  readonly modelDir?: string;
  /** Whether transformers.js may download the model from its hub when it is not in `modelDir`. */
  readonly allowRemote: boolean;
  /** Progress and outcome lines (stderr in the CLI). */
  readonly log: (line: string) => void;
  /**
   * Folder for the persistent vector cache (`search-vectors-<tier>.bin`); none when absent.
   * The household passes its data folder, the CLI the config's folder.
   */
  readonly cacheDir?: string;
}

/** The model the index uses by default: all-MiniLM-L6-v2 in its ONNX export. */
export const miniLmModel = 'Xenova/all-MiniLM-L6-v2';

/** The larger encoder of the quality tier: all-mpnet-base-v2 in an ONNX export (`npm run model:stage-mpnet`). */
export const mpnetModel = 'Xenova/all-mpnet-base-v2';

/**
 * Texts per inference. The worker sorts a request by length before batching, so a batch pads
 * little; even so, on a 2-core CPU with these int8 models one text per inference embedded the
 * 326-tool fixture fastest (batch 1: 4.8-6.8 s, 4: 9.1 s, 8: 9.4-12.7 s, 16: 7.1-10.0 s,
 * measured side by side on a loaded machine), so batching stays available but off.
 */
const embedBatchSize = 1;

/** The staged weights of `model` under `modelDir` (the file a fingerprint hashes). */
function weightsFile(modelDir: string, model: string): string {
  return join(modelDir, model, 'onnx', 'model_quantized.onnx');
}

/**
 * What a vector depends on: the model's name, its staged weights and tokenizer (SHA-256), and
 * the pooling. `undefined` when the weights are not staged locally (nothing to hash: no cache).
 */
export async function modelFingerprint(modelDir: string | undefined, model: string): Promise<string | undefined> {
  if (modelDir === undefined) return undefined;
  const files = [weightsFile(modelDir, model), join(modelDir, model, 'tokenizer.json')];
  if (!files.every((file) => existsSync(file))) return undefined;
  const hash = createHash('sha256');
  for (const file of files) {
    for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  }
  return `${model}#q8-mean-normalized#${hash.digest('hex').slice(0, 32)}`;
}

/**
 * Serves tool texts from `cache` and embeds only the ones it lacks, then saves the cache
 * (atomically: temporary file, then rename). A save that fails is logged once;
 * search is unaffected. Queries go straight to the model and are never written to disk.
 */
export function withVectorCache(
  embedder: Embedder,
  cache: VectorCache,
  log: (line: string) => void = () => undefined,
): Embedder {
  let saveFailed = false;
  const embedDocuments = embedder.embedDocuments?.bind(embedder) ?? embedder.embed.bind(embedder);
  let lastSave: Promise<void> = Promise.resolve();
  return {
    model: embedder.model,
    embed: (texts) => embedder.embed(texts),
    ...(embedder.similarities && { similarities: embedder.similarities.bind(embedder) }),
    async embedDocuments(texts) {
      const found = texts.map((text) => cache.get(text));
      const missing = [...new Set(texts.filter((_, position) => found[position] === undefined))];
      if (missing.length === 0) return found as Float32Array[];
      const vectors = await embedDocuments(missing);
      const computed = new Map<string, Float32Array>();
      missing.forEach((text, position) => {
        const vector = vectors[position];
        if (!vector) return;
        computed.set(text, vector);
        cache.set(text, vector);
      });
      // Saved before the vectors are handed over, so an index that is settled has its cache on
      // disk (a restart right after finds it); the write is a few milliseconds per 1 000 tools.
      lastSave = cache.save().catch((error: unknown) => {
        if (saveFailed) return;
        saveFailed = true;
        log(
          `vector cache not saved (${error instanceof Error ? error.message : String(error)}); search is unaffected.`,
        );
      });
      await lastSave;
      return texts.map((text, position) => found[position] ?? computed.get(text) ?? new Float32Array());
    },
    async close() {
      await lastSave;
      await embedder.close?.();
    },
  };
}

/** The cache file of one model in `cacheDir`. */
export function vectorCacheFile(cacheDir: string, model: string): string {
  return join(cacheDir, `search-vectors-${model.replace(/^.*\//, '').toLowerCase()}.bin`);
}

type WorkerMessage =
  | { readonly log: string }
  | { readonly ready: true }
  | { readonly failed: string }
  | { readonly id: number; readonly vectors: Float32Array[] }
  | { readonly id: number; readonly error: string };

/**
 * Loads all-MiniLM-L6-v2 with transformers.js (ONNX runtime, CPU, int8 weights) in a worker
 * thread (`embedding-worker.mjs`). Resolves to `undefined`, after one clear log line, when the
 * model cannot be loaded (offline, no cache): the caller then runs lexical-only and nothing else
 * changes. The worker holds the process open only while a request is in flight.
 */
export async function loadMiniLm(options: MiniLmOptions): Promise<Embedder | undefined> {
  return loadModel(miniLmModel, options);
}

/**
 * Loads `model` in its own worker (see {@link loadMiniLm}), with the persistent vector cache
 * when `options.cacheDir` is given and the weights are staged locally (so they can be hashed).
 */
export async function loadModel(model: string, options: MiniLmOptions): Promise<Embedder | undefined> {
  const [embedder, cache] = await Promise.all([startModel(model, options), openCache(model, options)]);
  return embedder && cache ? withVectorCache(embedder, cache, options.log) : embedder;
}

async function openCache(model: string, options: MiniLmOptions): Promise<VectorCache | undefined> {
  if (options.cacheDir === undefined) return undefined;
  const fingerprint = await modelFingerprint(options.modelDir, model).catch(() => undefined);
  if (fingerprint === undefined) return undefined;
  return VectorCache.open({ file: vectorCacheFile(options.cacheDir, model), fingerprint, log: options.log });
}

async function startModel(model: string, options: MiniLmOptions): Promise<Embedder | undefined> {
  const unavailable = (reason: string) => {
    options.log(`embedding model ${model} unavailable (${reason}); tool search is lexical-only (BM25).`);
    return undefined;
  };
  let worker: Worker;
  try {
    worker = new Worker(new URL('./embedding-worker.mjs', import.meta.url), {
      workerData: { model, modelDir: options.modelDir, allowRemote: options.allowRemote, batchSize: embedBatchSize },
    });
  } catch (error) {
    return unavailable(error instanceof Error ? error.message : String(error));
  }
  const pending = new Map<number, { resolve: (vectors: Float32Array[]) => void; reject: (error: Error) => void }>();
  let nextId = 0;
  let closing = false;
  /** Called once no request is in flight (see `close`). */
  const drainWaiters: (() => void)[] = [];
  const settled = () => {
    if (pending.size > 0) return;
    worker.unref();
    for (const drained of drainWaiters.splice(0)) drained();
  };
  const started = new Promise<string | undefined>((resolve) => {
    worker.on('message', (message: WorkerMessage) => {
      if ('log' in message) options.log(message.log);
      else if ('ready' in message) resolve(undefined);
      else if ('failed' in message) resolve(message.failed);
      else {
        const request = pending.get(message.id);
        pending.delete(message.id);
        settled();
        if ('vectors' in message) request?.resolve(message.vectors);
        else request?.reject(new Error(`embedding failed: ${message.error}`));
      }
    });
    worker.once('error', (error) => resolve(error.message));
  });
  const failure = await started;
  if (failure !== undefined) {
    await worker.terminate();
    return unavailable(failure);
  }
  worker.unref();
  worker.once('error', (error) => {
    for (const request of pending.values()) request.reject(error);
    pending.clear();
    settled();
  });
  const { matmul, Tensor } = await import('@huggingface/transformers');
  return {
    model,
    embed(texts) {
      if (texts.length === 0) return Promise.resolve([]);
      if (closing) return Promise.reject(new Error('the embedding model is shutting down'));
      const id = nextId++;
      worker.ref();
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        worker.postMessage({ id, texts: [...texts] });
      });
    },
    async similarities(matrix, query) {
      const rows = matrix.length / query.length;
      if (rows === 0) return new Float32Array(0);
      const product = await matmul(
        new Tensor('float32', matrix, [rows, query.length]),
        new Tensor('float32', query, [query.length, 1]),
      );
      return product.data as Float32Array;
    },
    // Terminating the thread while onnxruntime runs an inference there aborts the whole process
    // (SIGABRT: the native callback throws into a torn-down environment; issue 11, item 16), so
    // new requests are refused and the one in flight is waited for before the thread is stopped.
    async close() {
      closing = true;
      if (pending.size > 0) await new Promise<void>((drained) => drainWaiters.push(drained));
      await worker.terminate();
    },
  };
}

/** The embedding tiers of the config's `search.model`. */
export type SearchModel = 'minilm' | 'mpnet';

/** Options of {@link loadEmbedder}: where the models are, and which tier. */
export interface EmbedderOptions extends MiniLmOptions {
  /** Default `minilm`. */
  readonly model?: SearchModel;
}

/**
 * Several embedders as one: each text's vector is the concatenation of the parts' unit vectors,
 * part `i` scaled by `sqrt(weights[i])` (weights summing to 1). The dot product of two such
 * vectors is the weighted mean of the parts' cosines, so the index needs no change to rank by
 * an ensemble, and each part keeps its own persistent cache.
 */
export function combineEmbedders(parts: readonly { embedder: Embedder; weight: number }[]): Embedder {
  const total = parts.reduce((sum, part) => sum + part.weight, 0);
  const scales = parts.map((part) => Math.sqrt(part.weight / total));
  const join = (lists: Float32Array[][]): Float32Array[] =>
    (lists[0] ?? []).map((_, row) => {
      const width = lists.reduce((sum, list) => sum + (list[row]?.length ?? 0), 0);
      const joined = new Float32Array(width);
      let offset = 0;
      lists.forEach((list, part) => {
        const vector = list[row] ?? new Float32Array();
        const scale = scales[part] ?? 0;
        for (let i = 0; i < vector.length; i++) joined[offset + i] = (vector[i] ?? 0) * scale;
        offset += vector.length;
      });
      return joined;
    });
  const first = parts[0]?.embedder;
  return {
    model: parts.map((part) => part.embedder.model).join('+'),
    // Each part embeds on its own thread: the parts run side by side.
    embed: async (texts) => join(await Promise.all(parts.map((part) => part.embedder.embed(texts)))),
    embedDocuments: async (texts) =>
      join(
        await Promise.all(
          parts.map((part) => (part.embedder.embedDocuments ?? part.embedder.embed).call(part.embedder, texts)),
        ),
      ),
    ...(first?.similarities && { similarities: first.similarities.bind(first) }),
    async close() {
      await Promise.all(parts.map((part) => part.embedder.close?.()));
    },
  };
}

/** Weight of MiniLM's cosine in the quality tier's ensemble (chosen on the tuning half; see docs). */
const qualityTierMiniLmWeight = 0.5;

/**
 * Loads the embedding tier `options.model` (SPEC §3.3, issue 17): `minilm`, the fast default,
 * or `mpnet`, the quality tier (all-mpnet-base-v2 next to MiniLM, their cosines averaged). A
 * tier that cannot load its larger model says so once and runs on MiniLM alone.
 */
export async function loadEmbedder(options: EmbedderOptions): Promise<Embedder | undefined> {
  if ((options.model ?? 'minilm') === 'minilm') return loadModel(miniLmModel, options);
  const [miniLm, mpnet] = await Promise.all([loadModel(miniLmModel, options), loadModel(mpnetModel, options)]);
  if (!mpnet) {
    options.log('search.model "mpnet": the larger model is not available; ranking with MiniLM alone.');
    return miniLm;
  }
  if (!miniLm) return mpnet;
  return combineEmbedders([
    { embedder: miniLm, weight: qualityTierMiniLmWeight },
    { embedder: mpnet, weight: 1 - qualityTierMiniLmWeight },
  ]);
}
