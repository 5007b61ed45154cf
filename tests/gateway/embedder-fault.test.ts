import { afterEach, describe, expect, it } from 'vitest';
import type { Embedder } from '../../proxy/index';
import { createFixtureServer } from '../fixtures/fixture-server';
import { connectClient, searchNames } from '../proxy/helpers';
import { cleanupStack, startedGateway, waitableLogger } from './support';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

/** A model that loads, embeds `healthy` texts, then rejects every request (a crashed runtime). */
function faultyEmbedder(healthy: number): Embedder & { asked: number } {
  const embedder = {
    model: 'faulty',
    asked: 0,
    async embed(texts: readonly string[]) {
      embedder.asked++;
      if (embedder.asked > healthy) throw new Error('onnxruntime: session lost');
      return texts.map(() => Float32Array.from({ length: 4 }, (_, index) => (index === 0 ? 1 : 0)));
    },
  };
  return embedder;
}

// Regression: an embedder whose embed() rejected after the model loaded was an unhandled
// rejection that killed the process. Now search degrades to lexical, with one log line.
describe('an embedding model that fails after loading', () => {
  it.each([
    ['while the index embeds the tools', 1],
    ['on a query', 1_000],
  ])('%s: search answers lexically, the mode says so, one log line', async (_when, healthy) => {
    const embedder = faultyEmbedder(healthy);
    const logger = waitableLogger();
    const gateway = await startedGateway(cleanups, {
      embeddings: { embedder: Promise.resolve(embedder) },
      logger,
      servers: { fixture: { kind: 'in-process', server: createFixtureServer() } },
    });
    const client = await connectClient(gateway);
    cleanups.push(() => client.close());
    if (healthy > 1) {
      await gateway.ready();
      embedder.asked = healthy; // from now on every request fails: the next one is the query's
    }
    expect(await searchNames(client, 'echo a message')).toContain('fixture__echo');
    expect(await gateway.ready()).toBe('lexical');
    expect(gateway.searchMode).toBe('lexical');
    expect(await searchNames(client, 'add two numbers')).toContain('fixture__add');
    expect(logger.lines.filter((line) => line.includes('lexical-only'))).toHaveLength(1);
  });
});
