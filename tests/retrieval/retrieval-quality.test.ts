import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadMiniLm } from '../../proxy/index';
import { buildIndex, evaluateRetrieval } from './evaluate-retrieval';

const modelDir = fileURLToPath(new URL('../../.models', import.meta.url));
const staged = existsSync(`${modelDir}/Xenova/all-MiniLM-L6-v2/onnx/model_quantized.onnx`);

describe("retrieval quality on real MCP servers' tools", () => {
  it('the staged model is present (CI stages it; embedding tests never silently skip)', () => {
    expect(staged, 'run `npm run model:stage` first').toBe(true);
  });

  it('hybrid search reaches recall@5 >= 0.9 with the staged MiniLM model', { timeout: 120_000 }, async () => {
    const lines: string[] = [];
    const index = await buildIndex({
      embedder: loadMiniLm({ modelDir, allowRemote: false, log: (line) => lines.push(line) }),
    });
    const quality = await evaluateRetrieval(index);
    expect(quality.mode).toBe('hybrid');
    expect(quality.tools).toBeGreaterThanOrEqual(300);
    expect(quality.queries).toBeGreaterThanOrEqual(100);
    expect(quality.recallAt5, JSON.stringify(quality.misses, null, 1)).toBeGreaterThanOrEqual(0.9);
  });

  it('lexical-only search still works without the model and is measurably weaker', async () => {
    const quality = await evaluateRetrieval(await buildIndex({}));
    expect(quality.mode).toBe('lexical');
    expect(quality.recallAt5).toBeGreaterThan(0.5);
    expect(quality.recallAt5).toBeLessThan(0.9);
  });
});
