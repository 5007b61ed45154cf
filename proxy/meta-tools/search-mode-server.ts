import { randomUUID } from 'node:crypto';
import { ResultSchema } from '@modelcontextprotocol/core';
import {
  type CallToolResult,
  CLIENT_CAPABILITIES_META_KEY,
  type ClientCapabilities,
  Server,
  type ServerContext,
  type Tool,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import { isInputRequired } from '../gateway/input-required';
import type { CallContext, DiscoveryScope, Gateway, Principal } from '../gateway/types';
import { type InputRounds, localInputRounds } from './input-rounds';
import { type FaultLog, toToolResult } from './to-tool-result';

/** The discovery handle argument (docs/protocol.md): an opaque id, checked with the principal. */
const handleInput = z.string().max(64).optional();

/** `search_tools` input. */
const searchInput = z.strictObject({
  query: z.string().trim().min(1).max(1_000).describe('What you want to do, in a few words.'),
  // Out-of-range values are clamped by the gateway rather than refused (SPEC §3.3).
  top_k: z.number().finite().optional().describe('How many tools to return (1-50; default 5).'),
  handle: handleInput.describe('The handle an earlier search_tools returned, to keep adding to it (optional).'),
});

/** `search_tools` output: also sent as `structuredContent`. */
const searchOutput = z.object({
  query: z.string(),
  search_mode: z.enum(['loading', 'hybrid', 'lexical']),
  handle: z.string().optional(),
  still_connecting: z.array(z.string()).optional(),
  results: z.array(
    z.object({
      name: z.string(),
      description: z.string(),
      input_schema: z.record(z.string(), z.unknown()),
      score: z.number(),
    }),
  ),
});

/** `call_tool` input. */
const callInput = z.strictObject({
  tool_name: z.string().min(1).max(256).describe('The exact name returned by search_tools.'),
  arguments: z.record(z.string(), z.unknown()).default({}).describe("The tool's arguments."),
  handle: handleInput.describe('The handle search_tools returned with this tool, when it returned one.'),
});

/** `load_mcp_server` input. */
const loadInput = z.strictObject({
  server_name: z.string().min(1).max(64).describe('A short name for the server (letters, digits, "-", "_"; no "__").'),
  url: z.string().min(1).max(2_048).describe("The server's Streamable HTTP endpoint (http or https)."),
});

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Tool['inputSchema'] {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest as Tool['inputSchema'];
}

/** The three meta-tools of SPEC §3.4, each described by its zod schema. */
export const metaTools: Tool[] = [
  {
    name: 'search_tools',
    description:
      'Find tools for a task. Returns the best-matching tools with their exact names, descriptions and input schemas. Call this before call_tool: only tools found here in this session can be called.',
    inputSchema: jsonSchema(searchInput, 'input'),
    outputSchema: jsonSchema(searchOutput, 'output') as Tool['outputSchema'],
  },
  {
    name: 'call_tool',
    description:
      'Call a tool found by search_tools, by its exact name, with arguments matching its input schema, and the handle search_tools returned when it returned one.',
    inputSchema: jsonSchema(callInput, 'input'),
  },
  {
    name: 'load_mcp_server',
    description:
      "Connect an additional MCP server over Streamable HTTP and index its tools, subject to the operator's load policy. Then use search_tools to find its tools.",
    inputSchema: jsonSchema(loadInput, 'input'),
  },
];

/** The server's instructions: the workflow, told to the model on every face. */
export const searchModeInstructions = [
  'This server is a gateway to many tools. Workflow:',
  '1. Call search_tools with a short description of what you want to do.',
  '2. Call call_tool with the exact tool_name from the search results and its arguments; when search_tools returned a handle, pass it too.',
  'Only tools that search_tools returned in this session can be called; search again if a call says the tool was not discovered.',
  'load_mcp_server connects an additional Streamable HTTP MCP server by URL when the user asks for one.',
  'Never ask the user for a password, token or API key in chat: credentials are configured by the operator outside this conversation.',
].join('\n');

function textResult(text: string, isError = false): CallToolResult {
  return { content: [{ type: 'text', text }], ...(isError && { isError: true }) };
}

function inputError(tool: string, error: z.ZodError): CallToolResult {
  const details = error.issues.map((issue) => `${issue.path.join('.') || 'input'}: ${issue.message}`).join('; ');
  return textResult(`Invalid arguments for ${tool}: ${details}.`, true);
}

/** The context of one meta-tool call: a sessionless connection's scope is the handle the call carries. */
function withHandle(context: CallContext, handle: string | undefined): CallContext {
  if (context.scope.kind !== 'handle') return context;
  return { ...context, scope: { kind: 'handle', ...(handle !== undefined && { handle }) } };
}

async function searchTools(gateway: Gateway, args: unknown, context: CallContext): Promise<CallToolResult> {
  const parsed = searchInput.safeParse(args);
  if (!parsed.success) return inputError('search_tools', parsed.error);
  const { query, top_k: topK, handle } = parsed.data;
  const found = await gateway.search({ query, ...(topK !== undefined && { topK }) }, withHandle(context, handle));
  const structured: z.infer<typeof searchOutput> = {
    query,
    search_mode: found.mode,
    ...(found.handle !== undefined && { handle: found.handle }),
    // Servers whose tools are not indexed yet: the model can search again instead of concluding none exist.
    ...(found.connecting.length > 0 && { still_connecting: [...found.connecting] }),
    results: found.hits.map((hit) => ({
      name: hit.name,
      description: hit.description,
      input_schema: hit.inputSchema,
      score: Math.round(hit.score * 1000) / 1000,
    })),
  };
  const text =
    found.hits.length === 0
      ? `No tools matched "${query}". ${
          found.connecting.length > 0
            ? `Still connecting: ${found.connecting.join(', ')}; search again shortly.`
            : 'Try rephrasing: name the action and the thing it acts on in other words (for example "send message" instead of "notify").'
        }`
      : JSON.stringify(structured, null, 2);
  return { content: [{ type: 'text', text }], structuredContent: structured };
}

async function callTool(gateway: Gateway, args: unknown, context: CallContext): Promise<CallToolResult> {
  const parsed = callInput.safeParse(args);
  if (!parsed.success) return inputError('call_tool', parsed.error);
  return gateway.call(
    { tool: parsed.data.tool_name, arguments: parsed.data.arguments },
    withHandle(context, parsed.data.handle),
  );
}

async function loadServer(gateway: Gateway, args: unknown, context: CallContext): Promise<CallToolResult> {
  const parsed = loadInput.safeParse(args);
  if (!parsed.success) return inputError('load_mcp_server', parsed.error);
  const loaded = await gateway.load({ serverName: parsed.data.server_name, url: parsed.data.url }, context);
  return loaded.loaded
    ? textResult(`Loaded "${loaded.server}" with ${loaded.tools} tools. Use search_tools to find them.`)
    : textResult(loaded.reason, true);
}

/** Options of {@link createSearchModeServer}. */
export interface SearchModeServerOptions {
  /** Who this connection's client is, as the face proved it (SPEC §3.5). */
  readonly principal: Principal;
  /**
   * How the connection carries its discovery scope: `connection` (default) is its MCP session
   * (the `Mcp-Session-Id`, else the connection itself); `handle` is a sessionless client's
   * handle argument; a session scope given here is the host's own (the app's chat session).
   * A `modern` instance always carries handles.
   */
  readonly scope?: 'connection' | 'handle' | { readonly kind: 'session'; readonly id: string };
  /**
   * The protocol era the instance serves, as the SDK's factory says (docs/protocol.md): `legacy`
   * (default) is a 2025-11-25 session; `modern` serves 2026-07-28 requests, sessionless.
   */
  readonly era?: 'legacy' | 'modern';
  /** How questions to the person travel (SPEC §3.12); by default rounds of this process only. */
  readonly rounds?: InputRounds;
}

/** What the client declared: per request on 2026-07-28, at `initialize` on 2025. */
function clientCapabilitiesOf(server: Server, ctx: ServerContext): ClientCapabilities {
  const declared = (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY];
  return (declared as ClientCapabilities | undefined) ?? server.getClientCapabilities() ?? {};
}

/**
 * The search-mode face (SPEC §3.4): a new MCP server for one client connection (2025) or one
 * request (2026), offering exactly the three meta-tools over `gateway`, every call made as
 * `options.principal` in the scope the connection carries. A filter's question to the person is
 * an input round (`input_required`, pushed to a 2025 client by the SDK); a refused call is a
 * warning on the client's log, at the level the client set (2025 `logging/setLevel`, or 2026's
 * per-request `logLevel`).
 */
export function createSearchModeServer(gateway: Gateway, options: SearchModeServerOptions): Server {
  const connectionId = randomUUID();
  const modern = options.era === 'modern';
  const carried = modern ? 'handle' : (options.scope ?? 'connection');
  const rounds = options.rounds ?? localInputRounds();
  const server = new Server(
    { name: 'extensible-mcp', version: '0.1.0' },
    {
      capabilities: { tools: {}, logging: {} },
      instructions: searchModeInstructions,
      requestState: { verify: rounds.verify },
    },
  );
  server.setRequestHandler('tools/list', () => ({ tools: metaTools }));
  server.setRequestHandler('tools/call', async (request, ctx) => {
    const clientCapabilities = clientCapabilitiesOf(server, ctx);
    const scope: DiscoveryScope =
      carried === 'connection'
        ? { kind: 'session', id: ctx.sessionId ?? connectionId }
        : carried === 'handle'
          ? { kind: 'handle' }
          : carried;
    const context: CallContext = {
      principal: options.principal,
      scope,
      clientCapabilities,
      // A downstream's own requests during this call reach this 2025 client, tied to this request
      // (SPEC §3.10). A 2026 client cannot be sent requests: the round holds the call and asks it
      // through `input_required` (docs/protocol.md).
      ...(!modern && {
        relay: (relayed, relayOptions) => ctx.mcpReq.send(relayed as never, ResultSchema, relayOptions),
      }),
    };
    const { name, arguments: args } = request.params;
    const result = await rounds.run(
      ctx,
      { principal: options.principal, method: 'tools/call', name, arguments: args },
      {
        canAsk: clientCapabilities.elicitation !== undefined,
        canAskUrl: clientCapabilities.elicitation?.url !== undefined,
        hold: modern,
      },
      (turn) => answerMetaTool(gateway, { name, arguments: args }, { ...context, ...turn }),
    );
    if (name === 'call_tool' && result.isError === true) {
      const text = (result as CallToolResult).content
        .map((block) => (block.type === 'text' ? block.text : ''))
        .join(' ');
      await ctx.mcpReq.log('warning', text.slice(0, 2_000), 'extensible-mcp').catch(() => undefined);
    }
    return result;
  });
  return server;
}

/**
 * Answers one meta-tool call for any face (SPEC §3.4): `search_tools`, `call_tool` or
 * `load_mcp_server` through the gateway, in `context`. Refusals and faults are `isError` results;
 * a fault's cause goes to `log` (default stderr), never to the caller.
 */
export async function answerMetaTool(
  gateway: Gateway,
  call: { readonly name: string; readonly arguments?: Record<string, unknown> | undefined },
  context: CallContext,
  log?: FaultLog,
): Promise<CallToolResult> {
  const args = call.arguments ?? {};
  try {
    switch (call.name) {
      case 'search_tools':
        return await searchTools(gateway, args, context);
      case 'call_tool':
        return await callTool(gateway, args, context);
      case 'load_mcp_server':
        return await loadServer(gateway, args, context);
      default:
        return textResult(
          `Unknown tool "${call.name}". This server offers search_tools, call_tool and load_mcp_server.`,
          true,
        );
    }
  } catch (error) {
    if (isInputRequired(error)) throw error;
    return toToolResult(error, `${call.name} failed`, log);
  }
}
