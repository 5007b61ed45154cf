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

/**
 * Loads all-MiniLM-L6-v2 with transformers.js (ONNX runtime, CPU), int8 weights. Resolves to
 * `undefined`, after one clear log line, when the model cannot be loaded (offline, no cache):
 * the caller then runs lexical-only and nothing else changes.
 */
export async function loadMiniLm(options: MiniLmOptions): Promise<Embedder | undefined> {
  try {
    const { env, matmul, pipeline, Tensor } = await import('@huggingface/transformers');
    if (options.modelDir) env.localModelPath = options.modelDir;
    env.allowLocalModels = options.modelDir !== undefined;
    env.allowRemoteModels = options.allowRemote;
    const extractor = await pipeline('feature-extraction', miniLmModel, {
      dtype: 'q8',
      device: 'cpu',
      // One thread per inference: on a small machine a second thread costs more in
      // synchronisation than it saves for a model this small, and it leaves a core for the proxy.
      session_options: { intraOpNumThreads: 1 },
      progress_callback: (progress: { status: string; file?: string }) => {
        if (progress.status === 'done') options.log(`embedding model: loaded ${progress.file ?? miniLmModel}`);
      },
    });
    return {
      model: miniLmModel,
      async embed(texts) {
        if (texts.length === 0) return [];
        const output = await extractor([...texts], { pooling: 'mean', normalize: true });
        const [rows = 0, width = 0] = output.dims;
        const data = output.data as Float32Array;
        return Array.from({ length: rows }, (_, row) => data.slice(row * width, (row + 1) * width));
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
    };
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    options.log(`embedding model ${miniLmModel} unavailable (${reason}); tool search is lexical-only (BM25).`);
    return undefined;
  }
}
