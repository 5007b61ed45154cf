// A real stdio MCP server that lists the tools of one server of the retrieval corpora
// (tests/fixtures/tool-corpus*.json), exactly as they were recorded: `node corpus-server.mjs <server>`.
// Plain JavaScript so that dozens of them start quickly without a TypeScript loader.
import { readFileSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/server';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';

const name = process.argv[2];
const tools = ['tool-corpus.json', 'tool-corpus-unseen.json'].flatMap((file) => {
  try {
    return JSON.parse(readFileSync(new URL(`../fixtures/${file}`, import.meta.url), 'utf8')).tools;
  } catch {
    return [];
  }
});
const listed = tools
  .filter((tool) => tool.server === name)
  .map(({ name: toolName, description, inputSchema }) => ({ name: toolName, description, inputSchema }));
const server = new Server({ name: `corpus-${name}`, version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler('tools/list', () => ({ tools: listed }));
server.setRequestHandler('tools/call', () => ({
  content: [{ type: 'text', text: 'corpus tools only list themselves' }],
  isError: true,
}));
await server.connect(new StdioServerTransport());
