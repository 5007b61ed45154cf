import type { CallToolResult } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

// `npm run demo`: starts the extensible-mcp CLI over stdio in front of the example servers
// (server-everything and the pizza shop's agent) and drives it with a scripted MCP client, so
// every step runs for real: search, call, a refused undiscovered call, a hidden tool, and a
// refused runtime load. No API key and no network are needed.
const bold = (text: string) => (process.stdout.isTTY ? `\x1b[1m${text}\x1b[0m` : text);

/** Search results as `name (score)` lines; anything else as its text, clipped. */
function show(result: unknown, limit = 600): string {
  const { content, isError } = result as CallToolResult;
  const text = content.map((block) => (block.type === 'text' ? block.text : `[${block.type}]`)).join('\n');
  if (text.startsWith('{"query"') || text.startsWith('{\n  "query"')) {
    const { search_mode, results } = JSON.parse(text) as {
      search_mode: string;
      results: { name: string; score: number }[];
    };
    return `OK (${search_mode}): ${results.map((hit) => `${hit.name} (${hit.score})`).join(', ')}`;
  }
  const clipped = text.length > limit ? `${text.slice(0, limit)}…` : text;
  return `${isError ? 'REFUSED/ERROR' : 'OK'}: ${clipped}`;
}

async function step(title: string, action: () => Promise<unknown>): Promise<void> {
  process.stdout.write(`\n${bold(`▶ ${title}`)}\n`);
  process.stdout.write(`${show(await action())}\n`);
}

const client = new Client({ name: 'extensible-mcp-demo', version: '1.0.0' });
await client.connect(
  new StdioClientTransport({
    command: process.execPath,
    args: ['bin/extensible-mcp.mjs', '--config', 'examples/demo.json'],
    stderr: 'inherit',
  }),
);
const call = (name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args });
const search = (query: string, top_k = 3) => call('search_tools', { query, top_k });
const callTool = (tool_name: string, args: Record<string, unknown>) =>
  call('call_tool', { tool_name, arguments: args });

const { tools } = await client.listTools();
process.stdout.write(`\n${bold('▶ tools/list')}\n${tools.map((tool) => tool.name).join(', ')}\n`);
await step('call_tool before any search (the discovery gate refuses)', () =>
  callTool('everything__get-sum', { a: 2, b: 3 }),
);
await step('search_tools "add two numbers"', () => search('add two numbers'));
await step('call_tool everything__get-sum {a: 2, b: 3}', () => callTool('everything__get-sum', { a: 2, b: 3 }));
await step('search_tools "pizza menu prices"', () => search('pizza menu prices', 2));
await step('call_tool pizza__get_menu', () => callTool('pizza__get_menu', {}));
await step('search_tools "trigger a sampling request" (hidden by access control)', () =>
  search('trigger a sampling request', 3),
);
await step('call_tool everything__trigger-sampling-request (hidden: refused)', () =>
  callTool('everything__trigger-sampling-request', { prompt: 'hi' }),
);
await step('load_mcp_server from a look-alike URL (load control refuses)', () =>
  call('load_mcp_server', { server_name: 'notes', url: 'https://attacker.example/x.corp.example/mcp' }),
);
await client.close();
process.stdout.write(`\n${bold('Done.')} Every step above went through the real proxy and real MCP servers.\n`);
