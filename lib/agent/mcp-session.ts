import { createHash } from 'node:crypto';
import type { CallToolResult, Client, ElicitRequestFormParams, ElicitResult, Tool } from '@modelcontextprotocol/client';
import { connectInMemory, type Gateway } from '../../proxy/index';

/** What the human answered to a form, as the chat's elicitation handler reports it. */
export type ElicitAnswer = ElicitResult;

/** One chat's own MCP session on the embedded proxy: its own discovery gate (SPEC §8). */
export interface McpSession {
  /** The proxy's tools as `tools/list` answers them in this session (the three meta-tools). */
  listTools(): Promise<readonly Tool[]>;
  callTool(name: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<CallToolResult>;
  close(): Promise<void>;
}

/** Options of {@link openMcpSession}. */
export interface McpSessionOptions {
  readonly name: string;
  /** The chat session this MCP session serves: its principal, and its discovery scope unless `fresh`. */
  readonly chatSession: string;
  /** A scope of its own, empty whatever the chat has searched (the attack console's moves). */
  readonly fresh?: boolean;
  /** Shows the proxy's form to the human and resolves with their answer. */
  readonly elicit: (params: ElicitRequestFormParams, signal: AbortSignal) => Promise<ElicitAnswer>;
}

/**
 * The principal of a chat (SPEC §3.5): the chat session, named by a digest, since the session id
 * is what the browser holds and events are public to the household's log.
 */
export function chatPrincipal(chatSession: string): { readonly id: string } {
  return { id: `chat:${createHash('sha256').update(chatSession).digest('base64url').slice(0, 16)}` };
}

/** Longest a tool call may take: an elicitation form may wait for a person for up to ten minutes. */
const callTimeoutMs = 11 * 60_000;

/**
 * Opens a new search-mode MCP session on the gateway with a real MCP client that declares form
 * elicitation, so the proxy's elicitation filter can ask this chat's human for a missing field.
 * URL-mode elicitation is refused: the chat only renders forms.
 */
export async function openMcpSession(gateway: Gateway, options: McpSessionOptions): Promise<McpSession> {
  const client: Client = await connectInMemory(gateway, {
    name: options.name,
    capabilities: { elicitation: { form: {} } },
    principal: chatPrincipal(options.chatSession),
    // The chat session is the scope, kept in the household store: another instance can take a turn over.
    ...(options.fresh !== true && { scope: { kind: 'session', id: `chat:${options.chatSession}` } }),
  });
  client.setRequestHandler('elicitation/create', async (request, ctx) => {
    if (!('requestedSchema' in request.params)) return { action: 'decline' };
    return options.elicit(request.params, ctx.mcpReq.signal);
  });
  return {
    async listTools() {
      return (await client.listTools()).tools;
    },
    async callTool(name, args, signal) {
      // A per-call signal: the SDK never removes its abort listener, so the turn's signal gets only ours (removed after).
      const call = new AbortController();
      const abort = () => call.abort(signal?.reason);
      if (signal?.aborted) abort();
      signal?.addEventListener('abort', abort, { once: true });
      try {
        return (await client.callTool(
          { name, arguments: args },
          {
            timeout: callTimeoutMs,
            signal: call.signal,
          },
        )) as CallToolResult;
      } finally {
        signal?.removeEventListener('abort', abort);
      }
    },
    close: () => client.close(),
  };
}
