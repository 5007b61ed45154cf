import { existsSync, readFileSync } from 'node:fs';
import type { Tool } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { Embedder } from '../../proxy/index';
import { ToolIndex } from '../../proxy/search/tool-index';

/** A tool of a fixture corpus, as listed from its server. */
export interface CorpusTool {
  readonly server: string;
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Tool['inputSchema'];
}

/** One query of a query set; `split` only in the unseen set. */
export interface Query {
  readonly query: string;
  readonly expected: string;
  readonly alsoAcceptable?: readonly string[];
  readonly split?: 'tuning' | 'held-out';
}

const corpusSchema = z.object({
  tools: z.array(
    z.object({
      server: z.string().min(1),
      name: z.string().min(1),
      description: z.string(),
      inputSchema: z.looseObject({ type: z.literal('object') }),
    }),
  ),
});

const queriesSchema = z.object({
  queries: z.array(
    z.object({
      query: z.string().min(1),
      expected: z.string().min(1),
      alsoAcceptable: z.array(z.string()).optional(),
      split: z.enum(['tuning', 'held-out']).optional(),
    }),
  ),
});

const fixture = (name: string) => new URL(`../fixtures/${name}`, import.meta.url);

/** The original fixture (`tool-corpus.json`, `tool-queries.json`) and the unseen set written blind for issue 17. */
export type FixtureSet = 'fixture' | 'unseen';

const files: Record<FixtureSet, { corpus: string; queries: string }> = {
  fixture: { corpus: 'tool-corpus.json', queries: 'tool-queries.json' },
  unseen: { corpus: 'tool-corpus-unseen.json', queries: 'tool-queries-unseen.json' },
};

/** Whether the unseen set is present (it is committed before any tuning on it). */
export function hasUnseenSet(): boolean {
  return existsSync(fixture(files.unseen.corpus)) && existsSync(fixture(files.unseen.queries));
}

/** A fixture corpus (default: the original `tool-corpus.json`). */
export function loadCorpus(set: FixtureSet = 'fixture'): CorpusTool[] {
  return corpusSchema.parse(JSON.parse(readFileSync(fixture(files[set].corpus), 'utf8'))).tools as CorpusTool[];
}

/** A fixture query set (default: the original `tool-queries.json`). */
export function loadQueries(set: FixtureSet = 'fixture'): Query[] {
  return queriesSchema.parse(JSON.parse(readFileSync(fixture(files[set].queries), 'utf8'))).queries as Query[];
}

/**
 * The tools an evaluation indexes: the original corpus for the original queries; the original
 * and the unseen corpora together for the unseen queries, so they choose among every tool.
 */
export function corpusFor(set: FixtureSet): CorpusTool[] {
  return set === 'fixture' ? loadCorpus('fixture') : [...loadCorpus('fixture'), ...loadCorpus('unseen')];
}

/** Builds an index over `tools` (default: the original corpus), one server per corpus server. */
/** Puts corpus tools into `index`, one server at a time, under their qualified names. */
export function indexTools(index: ToolIndex, tools: readonly CorpusTool[]): void {
  for (const server of new Set(tools.map((tool) => tool.server))) {
    index.replace(
      server,
      tools
        .filter((tool) => tool.server === server)
        .map((tool) => ({
          name: `${server}__${tool.name}`,
          server,
          toolName: tool.name,
          description: tool.description,
          inputSchema: tool.inputSchema,
        })),
    );
  }
}

export async function buildIndex(options: {
  embedder?: Promise<Embedder | undefined>;
  tools?: readonly CorpusTool[];
}): Promise<ToolIndex> {
  const index = new ToolIndex(options.embedder);
  indexTools(index, options.tools ?? loadCorpus());
  await index.settled();
  return index;
}

/** Retrieval quality figures. */
export interface RetrievalQuality {
  readonly mode: string;
  readonly queries: number;
  readonly tools: number;
  readonly recallAt1: number;
  readonly recallAt5: number;
  readonly mrr: number;
  readonly misses: readonly { query: string; expected: string; got: readonly string[] }[];
}

/** recall@1, recall@5 and MRR of `index` on `queries` (default: the original query set). */
export async function evaluateRetrieval(
  index: ToolIndex,
  queries: readonly Query[] = loadQueries(),
): Promise<RetrievalQuality> {
  let at1 = 0;
  let at5 = 0;
  let reciprocal = 0;
  const misses: { query: string; expected: string; got: string[] }[] = [];
  for (const query of queries) {
    const accepted = new Set([query.expected, ...(query.alsoAcceptable ?? [])]);
    const ranked = (await index.search(query.query)).map((hit) => hit.name);
    const rank = ranked.findIndex((name) => accepted.has(name));
    if (rank === 0) at1++;
    if (rank >= 0 && rank < 5) at5++;
    else misses.push({ query: query.query, expected: query.expected, got: ranked.slice(0, 5) });
    if (rank >= 0) reciprocal += 1 / (rank + 1);
  }
  const round = (value: number) => Math.round(value * 1000) / 1000;
  const count = Math.max(1, queries.length);
  return {
    mode: index.mode,
    queries: queries.length,
    tools: index.size,
    recallAt1: round(at1 / count),
    recallAt5: round(at5 / count),
    mrr: round(reciprocal / count),
    misses,
  };
}

/** Quality on each evaluation: the original fixture, and both halves of the unseen set when present. */
export type QualityBySet = {
  readonly fixture: RetrievalQuality;
  readonly tuning?: RetrievalQuality;
  readonly heldOut?: RetrievalQuality;
};

/** Evaluates the original fixture and, when present, the unseen set's tuning and held-out halves. */
export async function evaluateAll(options: { embedder?: Promise<Embedder | undefined> }): Promise<QualityBySet> {
  const build = (tools: readonly CorpusTool[]) =>
    buildIndex({ tools, ...(options.embedder && { embedder: options.embedder }) });
  const fixtureQuality = await evaluateRetrieval(await build(corpusFor('fixture')), loadQueries('fixture'));
  if (!hasUnseenSet()) return { fixture: fixtureQuality };
  const index = await build(corpusFor('unseen'));
  const queries = loadQueries('unseen');
  return {
    fixture: fixtureQuality,
    tuning: await evaluateRetrieval(
      index,
      queries.filter((query) => query.split === 'tuning'),
    ),
    heldOut: await evaluateRetrieval(
      index,
      queries.filter((query) => query.split === 'held-out'),
    ),
  };
}
