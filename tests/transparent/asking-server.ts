/**
 * A stdio MCP server that asks its client things during a call, for the relay tests (SPEC §3.10).
 * Usage: `node --import tsx asking-server.ts [label]`.
 * - `whoami {note?}`: its label, its process id and the note, so a test can tell which process
 *   (and which configured command) answered.
 * - `connect_bank`: asks through a form for a user name and a password, and reports exactly what
 *   came back (the action, the fields it received, the proxy's refusal reason), never a value.
 * - `list_roots`: asks the client for its roots during the call and returns them.
 * - `deliver {size}`: asks through a form where to deliver (no secret in it), then asks the
 *   client's model to write the order's note, and returns both.
 * - `media`: one result of every content type: text, image, audio, an embedded resource, a link.
 * - `work {steps}`: reports progress for each step (when the call carries a progress token) and
 *   logs one message, during the call.
 */

import { McpServer } from '@modelcontextprotocol/server';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';

const label = process.argv[2] ?? 'default';
const server = new McpServer({ name: 'asking-server', version: '1.0.0' }, { capabilities: { logging: {} } });

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

server.registerTool(
  'deliver',
  { description: 'Delivers a pizza, asking where to', inputSchema: z.object({ size: z.string() }) },
  async ({ size }) => {
    const where = await server.server.elicitInput({
      mode: 'form',
      message: `Where should the ${size} pizza go?`,
      requestedSchema: {
        type: 'object',
        properties: { address: { type: 'string', title: 'Address' } },
        required: ['address'],
      },
    });
    if (where.action !== 'accept') return { content: [{ type: 'text', text: `not delivered: ${where.action}` }] };
    const note = await server.server.createMessage({
      messages: [{ role: 'user', content: { type: 'text', text: `Write a note for a ${size} pizza` } }],
      maxTokens: 20,
    });
    const text = note.content.type === 'text' ? note.content.text : note.content.type;
    return {
      content: [{ type: 'text', text: `delivering a ${size} pizza to ${where.content?.address}; note: ${text}` }],
    };
  },
);

/** One pixel, and a few bytes of audio: enough to see that each block arrives as it was sent. */
const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';
const AUDIO = Buffer.from('RIFF....WAVEfmt ').toString('base64');
server.registerTool('media', { description: 'Returns every content type', inputSchema: z.object({}) }, () => ({
  content: [
    { type: 'text', text: 'every kind' },
    { type: 'image', data: PIXEL, mimeType: 'image/png' },
    { type: 'audio', data: AUDIO, mimeType: 'audio/wav' },
    { type: 'resource', resource: { uri: 'memo://order/1', mimeType: 'text/plain', text: 'order one' } },
    { type: 'resource_link', uri: 'memo://order/2', name: 'order two' },
  ],
}));

server.registerTool(
  'work',
  { description: 'Works in steps, reporting progress', inputSchema: z.object({ steps: z.number() }) },
  async ({ steps }, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    await ctx.mcpReq.log('info', `working in ${steps} steps`, 'asking-server');
    for (let progress = 1; progress <= steps; progress++) {
      if (progressToken !== undefined) {
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken, progress, total: steps },
        });
      }
      // A step takes a moment, as real work does: its notification goes out before the result.
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return { content: [{ type: 'text', text: `worked ${steps} steps` }] };
  },
);

await server.connect(new StdioServerTransport());
