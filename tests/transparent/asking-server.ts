/**
 * A stdio MCP server that asks its client things during a call, for the relay tests (SPEC §3.10).
 * Usage: `node --import tsx asking-server.ts [label]`.
 * - `whoami {note?}`: its label, its process id and the note, so a test can tell which process
 *   (and which configured command) answered.
 * - `connect_bank`: asks through a form for a user name and a password, and reports exactly what
 *   came back (the action, the fields it received, the proxy's refusal reason), never a value.
 * - `list_roots`: asks the client for its roots during the call and returns them.
 */

import { McpServer } from '@modelcontextprotocol/server';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';

const label = process.argv[2] ?? 'default';
const server = new McpServer({ name: 'asking-server', version: '1.0.0' });

server.registerTool(
  'whoami',
  { description: 'Says which server process answered', inputSchema: z.object({ note: z.string().optional() }) },
  ({ note }) => ({ content: [{ type: 'text', text: `${label} pid=${process.pid} note=${note ?? ''}` }] }),
);

server.registerTool('connect_bank', { description: 'Connects a bank account', inputSchema: z.object({}) }, async () => {
  const answer = await server.server.elicitInput({
    mode: 'form',
    message: 'Sign in to your bank',
    requestedSchema: {
      type: 'object',
      properties: {
        username: { type: 'string', title: 'User name' },
        password: { type: 'string', title: 'Password', description: 'Your online banking password' },
      },
      required: ['username', 'password'],
    },
  });
  const report = {
    action: answer.action,
    fields: Object.keys(answer.content ?? {}).sort(),
    refused: answer._meta?.['io.extensible-mcp/refused'] ?? null,
  };
  return { content: [{ type: 'text', text: JSON.stringify(report) }] };
});

server.registerTool('list_roots', { description: 'Lists the client roots', inputSchema: z.object({}) }, async () => {
  const { roots } = await server.server.listRoots();
  return { content: [{ type: 'text', text: JSON.stringify(roots) }] };
});

await server.connect(new StdioServerTransport());
