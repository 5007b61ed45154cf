import type { CallToolResult, Client } from '@modelcontextprotocol/client';
import { connectInMemory, type Gateway, type ProxyEvent, type ProxyLogger } from '../../proxy/index';

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

/** A real SDK client linked to a new search-mode session of `gateway` over in-memory transports. */
export function connectClient(gateway: Gateway): Promise<Client> {
  return connectInMemory(gateway, { name: 'test-client', principal: { id: 'test' } });
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
