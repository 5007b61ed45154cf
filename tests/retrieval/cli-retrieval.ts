/**
 * `npx tsx tests/retrieval/cli-retrieval.ts [--model=minilm|mpnet]`: retrieval quality through
 * the real CLI (issue 17 acceptance). Every corpus server runs as its own stdio child
 * (`corpus-server.mjs`) under `bin/extensible-mcp.mjs`, a real MCP client waits for the log line
 * saying search is hybrid, then asks `search_tools` every query. Prints recall@1/@5 and MRR on the
 * original fixture (its own servers) and both halves of the unseen set, as JSON on stdout.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { corpusFor, type FixtureSet, hasUnseenSet, loadQueries, type Query } from './evaluate-retrieval';

const model = process.argv.find((arg) => arg.startsWith('--model='))?.slice('--model='.length) ?? 'minilm';
const log = (line: string) => process.stderr.write(`[cli-retrieval] ${line}\n`);

async function throughCli(set: FixtureSet, groups: Record<string, readonly Query[]>) {
  const folder = mkdtempSync(join(tmpdir(), 'cli-retrieval-'));
  const servers = [...new Set(corpusFor(set).map((tool) => tool.server))];
  const configPath = join(folder, 'config.json');
  writeFileSync(
    configPath,
    JSON.stringify({
      mcpServers: Object.fromEntries(
        servers.map((server) => [
          server,
          { command: process.execPath, args: [resolve('tests/retrieval/corpus-server.mjs'), server] },
        ]),
      ),
      search: { model },
    }),
  );
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [resolve('bin/extensible-mcp.mjs'), '--config', configPath],
    env: {
      ...(process.env as Record<string, string>),
      EXTENSIBLE_MCP_OFFLINE: '1',
      EXTENSIBLE_MCP_MODEL_DIR: resolve('.models'),
    },
    stderr: 'pipe',
  });
  // Ready once the CLI logs that search is hybrid (or that it never will be).
  const ready = new Promise<string>((resolveReady) => {
    let buffered = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const found = /search is hybrid|lexical-only/.exec(buffered);
      if (found) resolveReady(found[0]);
    });
  });
  const client = new Client({ name: 'cli-retrieval', version: '1' });
  await client.connect(transport);
  log(`${set}: ${servers.length} stdio servers; ${await ready}`);
  const results: Record<string, unknown> = {};
  for (const [group, queries] of Object.entries(groups)) {
    let at1 = 0;
    let at5 = 0;
    let reciprocal = 0;
    let mode = '';
    for (const query of queries) {
      const result = await client.callTool({ name: 'search_tools', arguments: { query: query.query, top_k: 50 } });
      const structured = result.structuredContent as { search_mode: string; results: { name: string }[] };
      mode = structured.search_mode;
      const accepted = new Set([query.expected, ...(query.alsoAcceptable ?? [])]);
      const rank = structured.results.findIndex((hit) => accepted.has(hit.name));
      if (rank === 0) at1++;
      if (rank >= 0 && rank < 5) at5++;
      if (rank >= 0) reciprocal += 1 / (rank + 1);
    }
    const round = (value: number) => Math.round((value / Math.max(1, queries.length)) * 1000) / 1000;
    results[group] = {
      mode,
      queries: queries.length,
      recallAt1: round(at1),
      recallAt5: round(at5),
      mrr: round(reciprocal),
    };
  }
  await client.close();
  rmSync(folder, { recursive: true, force: true });
  return results;
}

const output: Record<string, unknown> = {
  model,
  ...(await throughCli('fixture', { fixture: loadQueries('fixture') })),
};
if (hasUnseenSet()) {
  const unseen = loadQueries('unseen');
  Object.assign(
    output,
    await throughCli('unseen', {
      tuning: unseen.filter((query) => query.split === 'tuning'),
      heldOut: unseen.filter((query) => query.split === 'held-out'),
    }),
  );
}
process.stdout.write(`${JSON.stringify(output, null, 2)}\n`);
