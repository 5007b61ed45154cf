import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Embedder } from '../../proxy/index';
import {
  loadMiniLm,
  miniLmModel,
  modelFingerprint,
  vectorCacheFile,
  withVectorCache,
} from '../../proxy/search/embedder';
import { ToolIndex } from '../../proxy/search/tool-index';
import { VectorCache } from '../../proxy/search/vector-cache';
import { loadCorpus } from './evaluate-retrieval';

// Fast start (issue 17): a restart with unchanged servers reads every tool's vector from the
// persistent cache instead of running the model, and is hybrid at once; a tool whose text
// changed is re-embedded. Runs the real staged MiniLM model.
const modelDir = resolve('.models');
const staged = existsSync(join(modelDir, miniLmModel, 'onnx', 'model_quantized.onnx'));

const tools = loadCorpus()
  .filter((tool) => ['github', 'slack', 'filesystem'].includes(tool.server))
  .map((tool) => ({
    name: `${tool.server}__${tool.name}`,
    server: tool.server,
    toolName: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema,
  }));

function indexAll(index: ToolIndex, list: typeof tools): void {
  for (const server of new Set(list.map((tool) => tool.server))) {
    index.replace(
      server,
      list.filter((tool) => tool.server === server),
    );
  }
}

describe('persistent vector cache with the staged model', () => {
  let folder: string;
  let model: Embedder;
  /** Every tool text and query the real model was asked to embed. */
  const embedded: string[] = [];
  let counting: Embedder;
  let fingerprint: string;

  beforeAll(async () => {
    expect(staged, 'run `npm run model:stage` first').toBe(true);
    folder = await mkdtemp(join(tmpdir(), 'warm-restart-'));
    const loaded = await loadMiniLm({ modelDir, allowRemote: false, log: () => undefined });
    if (!loaded) throw new Error('the staged model did not load');
    model = loaded;
    counting = {
      model: model.model,
      embed: (texts) => {
        embedded.push(...texts);
        return model.embed(texts);
      },
    };
    fingerprint = (await modelFingerprint(modelDir, miniLmModel)) ?? '';
    expect(fingerprint).toContain(miniLmModel);
  }, 60_000);
  afterAll(async () => {
    await model?.close?.();
    await rm(folder, { recursive: true, force: true });
  });

  const cacheFile = () => vectorCacheFile(folder, miniLmModel);
  const start = async (list: typeof tools) => {
    const cache = await VectorCache.open({ file: cacheFile(), fingerprint });
    const index = new ToolIndex(Promise.resolve(withVectorCache(counting, cache)));
    indexAll(index, list);
    return index;
  };

  it('a warm restart serves hybrid results without re-embedding, and a changed tool is re-embedded', async () => {
    // Cold: every tool is embedded once.
    const cold = await start(tools);
    expect(await cold.settled()).toBe('hybrid');
    expect(embedded).toHaveLength(tools.length);
    const query = 'post a message to the team channel';
    const coldHits = (await cold.search(query, 5)).map((hit) => [hit.name, hit.score]);
    expect(existsSync(cacheFile())).toBe(true);

    // Warm: the same tools, a fresh index and cache object: no tool reaches the model.
    embedded.length = 0;
    const warm = await start(tools);
    expect(await warm.settled()).toBe('hybrid');
    expect(embedded).toEqual([]);
    const warmHits = (await warm.search(query, 5)).map((hit) => [hit.name, hit.score]);
    expect(embedded).toEqual([query]);
    expect(warmHits).toEqual(coldHits);
    expect(warmHits[0]?.[0]).toMatch(/^slack__/);

    // One tool's description changed: exactly that tool is embedded again.
    embedded.length = 0;
    const changed = tools.map((tool, position) =>
      position === 3 ? { ...tool, description: `${tool.description} (changed upstream)` } : tool,
    );
    const restarted = await start(changed);
    expect(await restarted.settled()).toBe('hybrid');
    expect(embedded).toHaveLength(1);
    expect(embedded[0]).toContain('(changed upstream)');
  });

  it('loadMiniLm with a cache folder writes the cache and a warm start leaves it untouched', async () => {
    const cacheDir = join(folder, 'household');
    const lines: string[] = [];
    const log = (line: string) => lines.push(line);
    const first = new ToolIndex(loadMiniLm({ modelDir, allowRemote: false, log, cacheDir }));
    indexAll(first, tools);
    expect(await first.settled()).toBe('hybrid');
    const file = vectorCacheFile(cacheDir, miniLmModel);
    const written = await stat(file);
    const second = new ToolIndex(loadMiniLm({ modelDir, allowRemote: false, log, cacheDir }));
    indexAll(second, tools);
    expect(await second.settled()).toBe('hybrid');
    // Nothing new was embedded, so nothing was saved: the file is the first run's.
    expect((await stat(file)).mtimeMs).toBe(written.mtimeMs);
    expect(lines.filter((line) => /vector cache/.test(line))).toEqual([]);
  });

  it('a truncated cache file is ignored with one log line and rebuilt', async () => {
    const cacheDir = join(folder, 'damaged');
    const lines: string[] = [];
    const log = (line: string) => lines.push(line);
    const first = new ToolIndex(loadMiniLm({ modelDir, allowRemote: false, log, cacheDir }));
    indexAll(first, tools.slice(0, 4));
    expect(await first.settled()).toBe('hybrid');
    const file = vectorCacheFile(cacheDir, miniLmModel);
    const bytes = await readFile(file);
    await writeFile(file, bytes.subarray(0, Math.floor(bytes.length / 2)));
    const second = new ToolIndex(loadMiniLm({ modelDir, allowRemote: false, log, cacheDir }));
    indexAll(second, tools.slice(0, 4));
    expect(await second.settled()).toBe('hybrid');
    expect(lines.filter((line) => /vector cache/.test(line))).toEqual([expect.stringMatching(/ignored.*checksum/)]);
    // Rebuilt: the file is whole again and holds the four tools.
    const reopened = await VectorCache.open({ file, fingerprint, log });
    expect(reopened.size).toBe(4);
  });
});
