// The embedding model's thread. onnxruntime runs inference synchronously on the calling thread,
// so the model lives here: indexing thousands of tools never blocks the proxy's event loop, and
// a query is embedded while the main thread runs BM25.
// Plain JavaScript so it starts without a TypeScript loader. Protocol (all messages are objects):
//   in:  {id, texts: string[]}
//   out: {log: string} | {ready: true} | {failed: string} | {id, vectors: Float32Array[]} | {id, error: string}
import { parentPort, workerData } from 'node:worker_threads';
import { env, pipeline } from '@huggingface/transformers';

const { model, modelDir, allowRemote, batchSize } = workerData;
if (modelDir) env.localModelPath = modelDir;
env.allowLocalModels = Boolean(modelDir);
env.allowRemoteModels = allowRemote;

let extractor;
try {
  extractor = await pipeline('feature-extraction', model, {
    dtype: 'q8',
    device: 'cpu',
    // One thread per inference: for a model this small a second one costs more in
    // synchronisation than it saves on a small machine, and it leaves a core for the proxy.
    session_options: { intraOpNumThreads: 1 },
    progress_callback: (progress) => {
      if (progress.status === 'done')
        parentPort.postMessage({ log: `embedding model: loaded ${progress.file ?? model}` });
    },
  });
  parentPort.postMessage({ ready: true });
} catch (error) {
  parentPort.postMessage({ failed: error instanceof Error ? error.message.split('\n')[0] : String(error) });
}

/**
 * Embeds `texts` in batches of texts of similar length (sorted by length first), so padding a
 * batch to its longest text wastes little; vectors come back in the order of `texts`.
 */
async function embedAll(texts) {
  const order = texts.map((_, index) => index).sort((a, b) => texts[a].length - texts[b].length);
  const vectors = new Array(texts.length);
  for (let start = 0; start < order.length; start += batchSize) {
    const batch = order.slice(start, start + batchSize);
    const output = await extractor(
      batch.map((index) => texts[index]),
      { pooling: 'mean', normalize: true },
    );
    const width = output.dims[1] ?? 0;
    batch.forEach((index, row) => {
      vectors[index] = output.data.slice(row * width, (row + 1) * width);
    });
  }
  return vectors;
}

parentPort.on('message', async ({ id, texts }) => {
  try {
    const vectors = await embedAll(texts);
    parentPort.postMessage(
      { id, vectors },
      vectors.map((vector) => vector.buffer),
    );
  } catch (error) {
    parentPort.postMessage({ id, error: error instanceof Error ? error.message : String(error) });
  }
});
