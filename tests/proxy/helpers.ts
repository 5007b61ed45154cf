import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ExtensibleProxy, ProxyEvent, ProxyLogger } from '../../proxy/index';

/** A logger that keeps lines for assertions instead of printing them. */
export function memoryLogger(): ProxyLogger & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    info: (line) => lines.push(line),
    error: (line, error) => lines.push(`${line}: ${error instanceof Error ? error.message : String(error)}`),
  };
}

/** Collects proxy events. */
export function eventLog(): { events: ProxyEvent[]; onEvent: (event: ProxyEvent) => void } {
  const events: ProxyEvent[] = [];
  return { events, onEvent: (event) => events.push(event) };
}

/** A real SDK client linked to a new session of `proxy` over in-memory transports. */
export async function connectClient(proxy: ExtensibleProxy): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await proxy.createServer().connect(serverSide);
  const client = new Client({ name: 'test-client', version: '1.0.0' });
  await client.connect(clientSide);
  return client;
}

/** The text of a tool result's first content block. */
export function textOf(result: unknown): string {
  const content = (result as CallToolResult).content[0];
  return content?.type === 'text' ? content.text : '';
}

/** Runs `search_tools` and returns the names it found. */
export async function searchNames(client: Client, query: string, topK?: number): Promise<string[]> {
  const result = await client.callTool({
    name: 'search_tools',
    arguments: { query, ...(topK !== undefined && { top_k: topK }) },
  });
  const text = textOf(result);
  if (!text.startsWith('{')) return [];
  return (JSON.parse(text) as { results: { name: string }[] }).results.map((hit) => hit.name);
}

/** Runs `call_tool`. */
export async function callTool(
  client: Client,
  toolName: string,
  args: Record<string, unknown> = {},
): Promise<CallToolResult> {
  return (await client.callTool({
    name: 'call_tool',
    arguments: { tool_name: toolName, arguments: args },
  })) as CallToolResult;
}
