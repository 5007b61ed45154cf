import { Worker } from 'node:worker_threads';

/** Turns texts into unit-length sentence embeddings. */
export interface Embedder {
  /** The model's name, for log lines and benchmark output. */
  readonly model: string;
  embed(texts: readonly string[]): Promise<Float32Array[]>;
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
}

/** The model the index uses: all-MiniLM-L6-v2 in its ONNX export. */
export const miniLmModel = 'Xenova/all-MiniLM-L6-v2';

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
  const unavailable = (reason: string) => {
    options.log(`embedding model ${miniLmModel} unavailable (${reason}); tool search is lexical-only (BM25).`);
    return undefined;
  };
  let worker: Worker;
  try {
    worker = new Worker(new URL('./embedding-worker.mjs', import.meta.url), {
      workerData: { model: miniLmModel, modelDir: options.modelDir, allowRemote: options.allowRemote },
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
    model: miniLmModel,
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
