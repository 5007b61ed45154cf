import { InMemoryTransport, Server } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { callTool, configFrom, connectThroughProxy, type ProxySession } from '../transparent/helpers';

// Issue 11 item 9: transparent mode asked the human, through an elicitation form, for secrets
// whose field names dodged the marker list by case, separators, digits, abbreviations or a
// Cyrillic look-alike, or whose only tell was the description. A secret is never requested
// through a form (SPEC §3.10): each call must come back blocked with no form sent.

/** One tool per disguised secret: its only required field is the secret. */
const SECRET_FIELDS: readonly { name: string; description?: string }[] = [
  { name: 'passWord' },
  { name: 'pass_word' },
  { name: 'password1' },
  { name: 'passwd' },
  { name: 'pwd' },
  { name: 'pin' },
  { name: 'otp' },
  { name: 'ssh_key' },
  { name: 'access_key' },
  { name: 'authorization' },
  { name: 'bearer' },
  { name: 'cookie' },
  { name: 'session_id' },
  { name: 'ssn' },
  { name: 'mnemonic' },
  { name: 'seed_phrase' },
  { name: 'p\u0430ssword' },
  { name: 'pass\u200bword' },
  { name: 'scope', description: 'One of your GitHub personal access tokens' },
];

/** Fields that look a little like secrets but are not: these may be asked for. */
const ORDINARY_FIELDS = ['max_tokens', 'token_count', 'pinned', 'spinner', 'options', 'cookies_enabled'];

const toolName = (index: number) => `tool_${index}`;

function tool(name: string, field: { name: string; description?: string }, type = 'string') {
  return {
    name,
    description: `Takes ${field.name}`,
    inputSchema: {
      type: 'object',
      properties: {
        [field.name]: { type, ...(field.description !== undefined && { description: field.description }) },
      },
      required: [field.name],
    },
  };
}

const TOOLS = [
  ...SECRET_FIELDS.map((field, index) => tool(toolName(index), field)),
  ...ORDINARY_FIELDS.map((name) =>
    tool(`ordinary_${name}`, { name }, name === 'cookies_enabled' ? 'boolean' : 'string'),
  ),
];

/** An in-memory upstream listing TOOLS and recording every call that reaches it. */
async function recordingUpstream() {
  const calls: { name: string; arguments: unknown }[] = [];
  const server = new Server({ name: 'vault', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler('tools/list', () => ({ tools: TOOLS }) as never);
  server.setRequestHandler('tools/call', (request) => {
    calls.push({ name: request.params.name, arguments: request.params.arguments });
    return { content: [{ type: 'text', text: 'done' }] };
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  return { calls, transport: clientSide };
}

let session: ProxySession | undefined;
afterEach(async () => {
  await session?.close();
  session = undefined;
});

async function start() {
  const upstream = await recordingUpstream();
  session = await connectThroughProxy({
    config: configFrom({ upstream: { url: 'http://unused.invalid/mcp' } }),
    upstreamTransport: upstream.transport,
    // The client declares form elicitation and would hand over anything it is asked for.
    answer: (request) => {
      const properties = 'requestedSchema' in request ? request.requestedSchema.properties : {};
      const content = Object.fromEntries(
        Object.entries(properties).map(([key, schema]) => [
          key,
          schema.type === 'boolean' ? true : 'typed-by-the-human',
        ]),
      );
      return { action: 'accept', content };
    },
  });
  return { session, upstream };
}

describe('transparent mode never asks for a disguised secret', () => {
  it.each(SECRET_FIELDS.map((field, index) => [JSON.stringify(field.name), field, index] as const))(
    'blocks %s without sending a form',
    async (_label, field, index) => {
      const { session, upstream } = await start();
      const result = await callTool(session.client, toolName(index), {});
      expect(session.forms).toEqual([]);
      expect(upstream.calls).toEqual([]);
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toMatchObject({
        error: 'tool_call_blocked',
        tool: toolName(index),
        status: 'blocked',
        reason: 'sensitive_required_field',
        missing_or_ambiguous: [field.name],
      });
    },
  );

  it.each(ORDINARY_FIELDS)('still asks for the ordinary field %s through a form', async (name) => {
    const { session, upstream } = await start();
    const result = await callTool(session.client, `ordinary_${name}`, {});
    expect(result.isError).not.toBe(true);
    expect(session.forms.map((form) => Object.keys(form.requestedSchema.properties))).toEqual([[name]]);
    expect(upstream.calls).toHaveLength(1);
  });
});
