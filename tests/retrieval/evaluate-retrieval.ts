import { readFileSync } from 'node:fs';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Embedder } from '../../proxy/index';
import { ToolIndex } from '../../proxy/search/tool-index';

interface CorpusTool {
  readonly server: string;
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Tool['inputSchema'];
}

interface Query {
  readonly query: string;
  readonly expected: string;
  readonly alsoAcceptable?: readonly string[];
}

const fixture = (name: string) => new URL(`../fixtures/${name}`, import.meta.url);

/** The real-server tool corpus (tests/fixtures/tool-corpus.json). */
export function loadCorpus(): CorpusTool[] {
  return (JSON.parse(readFileSync(fixture('tool-corpus.json'), 'utf8')) as { tools: CorpusTool[] }).tools;
}

/** The query set (tests/fixtures/tool-queries.json). */
export function loadQueries(): Query[] {
  return (JSON.parse(readFileSync(fixture('tool-queries.json'), 'utf8')) as { queries: Query[] }).queries;
}

/** Builds an index over the corpus, one server per corpus server. */
export async function buildIndex(options: { embedder?: Promise<Embedder | undefined> }): Promise<ToolIndex> {
  const index = new ToolIndex(options.embedder);
  const tools = loadCorpus();
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

/** recall@1, recall@5 and MRR of `index` on the query set. */
export async function evaluateRetrieval(index: ToolIndex): Promise<RetrievalQuality> {
  const queries = loadQueries();
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
  return {
    mode: index.mode,
    queries: queries.length,
    tools: index.size,
    recallAt1: round(at1 / queries.length),
    recallAt5: round(at5 / queries.length),
    mrr: round(reciprocal / queries.length),
    misses,
  };
}
