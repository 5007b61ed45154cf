import { mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Embedder } from './embedder';
import { withVectorCache } from './embedder';
import { VectorCache } from './vector-cache';

const vector = (...values: number[]) => new Float32Array(values);

describe('VectorCache', () => {
  let folder: string;
  let file: string;
  beforeEach(async () => {
    folder = await mkdtemp(join(tmpdir(), 'vector-cache-'));
    file = join(folder, 'nested', 'vectors.bin');
  });
  afterEach(async () => {
    await rm(folder, { recursive: true, force: true });
  });

  const open = (options: { fingerprint?: string; maxEntries?: number; log?: (line: string) => void } = {}) =>
    VectorCache.open({ file, fingerprint: options.fingerprint ?? 'model-a', ...options });

  it('reads back exactly what it saved, keyed by the exact text', async () => {
    const cache = await open();
    cache.set('alpha: first tool', vector(0.5, -0.25, 1));
    cache.set('beta: second tool', vector(1, 0, 0));
    await cache.save();
    const again = await open();
    expect(again.size).toBe(2);
    expect([...(again.get('alpha: first tool') ?? [])]).toEqual([0.5, -0.25, 1]);
    expect([...(again.get('beta: second tool') ?? [])]).toEqual([1, 0, 0]);
    // One character more is another text.
    expect(again.get('alpha: first tool.')).toBeUndefined();
  });

  it('does not store the texts themselves', async () => {
    const cache = await open();
    cache.set('a secret-looking tool description', vector(1, 2));
    await cache.save();
    expect((await readFile(file)).includes(Buffer.from('secret-looking'))).toBe(false);
  });

  it('ignores a file written for another model (and says so once)', async () => {
    const cache = await open();
    cache.set('alpha', vector(1, 0));
    await cache.save();
    const lines: string[] = [];
    const other = await open({ fingerprint: 'model-b', log: (line) => lines.push(line) });
    expect(other.size).toBe(0);
    expect(other.get('alpha')).toBeUndefined();
    expect(lines).toEqual([expect.stringMatching(/another model/)]);
  });

  it.each([
    ['truncated', (bytes: Buffer) => bytes.subarray(0, bytes.length - 7)],
    [
      'a flipped byte in a vector',
      (bytes: Buffer) => Buffer.from(bytes.map((byte, i) => (i === 60 ? byte ^ 1 : byte))),
    ],
    ['garbage', () => Buffer.from('not a cache at all, just some text that is long enough to read')],
    ['empty', () => Buffer.alloc(0)],
  ])('ignores a %s file, logs it once, and rebuilds it on the next save', async (_, damage) => {
    const cache = await open();
    cache.set('alpha', vector(1, 0));
    cache.set('beta', vector(0, 1));
    await cache.save();
    await writeFile(file, damage(await readFile(file)));
    const lines: string[] = [];
    const damaged = await open({ log: (line) => lines.push(line) });
    expect(damaged.size).toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/ignored/);
    damaged.set('gamma', vector(0.5, 0.5));
    await damaged.save();
    const rebuilt = await open({ log: (line) => lines.push(line) });
    expect(lines).toHaveLength(1);
    expect([...(rebuilt.get('gamma') ?? [])]).toEqual([0.5, 0.5]);
  });

  it('a file cut anywhere never loads partially', async () => {
    const cache = await open();
    for (let i = 0; i < 5; i++) cache.set(`tool ${i}`, vector(i, i + 1, i + 2));
    await cache.save();
    const whole = await stat(file);
    for (const size of [0, 8, 12, 40, 100, whole.size - 33, whole.size - 1]) {
      await cache.save();
      const copy = join(folder, `cut-${size}.bin`);
      await writeFile(copy, await readFile(file));
      await truncate(copy, size);
      const lines: string[] = [];
      const cut = await VectorCache.open({ file: copy, fingerprint: 'model-a', log: (line) => lines.push(line) });
      expect(cut.size, `cut at ${size}`).toBe(0);
      expect(lines).toHaveLength(1);
    }
  });

  it('keeps at most maxEntries vectors, dropping the least recently used', async () => {
    const cache = await open({ maxEntries: 3 });
    cache.set('one', vector(1));
    cache.set('two', vector(2));
    cache.set('three', vector(3));
    expect(cache.get('one')).toBeDefined(); // "one" is now the most recently used
    cache.set('four', vector(4));
    expect(cache.size).toBe(3);
    expect(cache.get('two')).toBeUndefined();
    await cache.save();
    const again = await open({ maxEntries: 2 });
    expect(again.size).toBe(2);
    expect(again.get('three')).toBeUndefined();
    expect([...(again.get('one') ?? [])]).toEqual([1]);
    expect([...(again.get('four') ?? [])]).toEqual([4]);
  });

  it('writes through a temporary file and leaves none behind', async () => {
    const cache = await open();
    cache.set('alpha', vector(1, 0));
    await Promise.all([cache.save(), cache.save(), cache.save()]);
    cache.set('beta', vector(0, 1));
    await cache.save();
    expect(await readdir(join(folder, 'nested'))).toEqual(['vectors.bin']);
    expect((await open()).size).toBe(2);
  });

  it('keeps the previous file when a save fails', async () => {
    const cache = await open();
    cache.set('alpha', vector(1, 0));
    await cache.save();
    // A folder where the temporary file's rename target is makes the rename fail.
    const blocked = await VectorCache.open({ file: join(folder, 'nested'), fingerprint: 'model-a' });
    blocked.set('beta', vector(0, 1));
    await expect(blocked.save()).rejects.toThrow();
    expect(await readdir(folder)).toEqual(['nested']);
    expect((await open()).size).toBe(1);
  });
});

describe('withVectorCache', () => {
  let folder: string;
  beforeEach(async () => {
    folder = await mkdtemp(join(tmpdir(), 'vector-cache-'));
  });
  afterEach(async () => {
    await rm(folder, { recursive: true, force: true });
  });

  /** Counts the texts it is asked to embed; vectors are the text's length and first char code. */
  function counting() {
    const embedded: string[] = [];
    const embedder: Embedder = {
      model: 'counting',
      embed: async (texts) => {
        embedded.push(...texts);
        return texts.map((text) => vector(text.length, text.charCodeAt(0)));
      },
    };
    return { embedder, embedded };
  }

  it('embeds only what the cache lacks, and never caches queries', async () => {
    const file = join(folder, 'vectors.bin');
    const first = counting();
    const cached = withVectorCache(first.embedder, await VectorCache.open({ file, fingerprint: 'f' }));
    expect((await cached.embedDocuments?.(['aa', 'bbb', 'aa']))?.map((v) => [...v])).toEqual([
      [2, 97],
      [3, 98],
      [2, 97],
    ]);
    expect(first.embedded).toEqual(['aa', 'bbb']);
    await cached.embed(['a query']);
    await cached.close?.();
    const second = counting();
    const warm = withVectorCache(second.embedder, await VectorCache.open({ file, fingerprint: 'f' }));
    expect((await warm.embedDocuments?.(['bbb', 'cccc', 'aa']))?.map((v) => [...v])).toEqual([
      [3, 98],
      [4, 99],
      [2, 97],
    ]);
    expect(second.embedded).toEqual(['cccc']);
    expect((await VectorCache.open({ file, fingerprint: 'f' })).get('a query')).toBeUndefined();
  });
});
