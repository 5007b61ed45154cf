import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../config';

// The config's `search` block (issue 17): the embedding tier and the persistent vector cache.
describe('config: search', () => {
  let folder: string;
  beforeEach(() => {
    folder = mkdtempSync(join(tmpdir(), 'search-config-'));
  });
  afterEach(() => rmSync(folder, { recursive: true, force: true }));

  const load = (search?: unknown) => {
    const path = join(folder, 'config.json');
    writeFileSync(path, JSON.stringify({ mcpServers: {}, ...(search !== undefined && { search }) }));
    return loadConfig(path);
  };

  it('defaults to the fast MiniLM tier with the vector cache on', () => {
    expect(load().search).toEqual({ model: 'minilm', vector_cache: true });
    expect(load({}).search).toEqual({ model: 'minilm', vector_cache: true });
  });

  it('accepts the quality tier and turning the cache off', () => {
    expect(load({ model: 'mpnet', vector_cache: false }).search).toEqual({ model: 'mpnet', vector_cache: false });
  });

  it.each([
    [{ model: 'bert' }, /search\.model/],
    [{ model: 'minilm', cache: true }, /search/],
    [{ vector_cache: 'yes' }, /search\.vector_cache/],
    ['mpnet', /search/],
  ])('rejects %j naming the JSON path', (search, message) => {
    expect(() => load(search)).toThrow(message);
  });
});
