import { fileURLToPath } from 'node:url';
import type {
  CallToolResult,
  ClientCapabilities,
  CreateMessageRequest,
  CreateMessageResult,
  ElicitRequest,
  ElicitRequestFormParams,
  ElicitResult,
  JSONRPCMessage,
  Root,
  Transport,
  TransportSendOptions,
} from '@modelcontextprotocol/client';
import { Client, InMemoryTransport } from '@modelcontextprotocol/client';
import { ResultSchema } from '@modelcontextprotocol/core';
import {
  createTransparentProxy,
  parseTransparentConfig,
  type TransparentProxy,
  type TransparentProxyOptions,
} from '../../proxy/transparent/index';

/** The server-everything entry point, run over stdio with `node`. */
export const EVERYTHING_ENTRY = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/server-everything/dist/index.js', import.meta.url),
);

/** Builds a validated config through the same schema the YAML goes through. */
export function configFrom(raw: Record<string, unknown>) {
  return parseTransparentConfig(raw, 'test-config.yaml');
}

/** Answers each form the proxy sends; records what was asked. */
export type FormAnswer = (request: ElicitRequest['params']) => ElicitResult | Promise<ElicitResult>;

/** A real SDK client connected to a transparent proxy over an in-memory linked pair. */
export interface ProxySession {
  readonly client: Client;
  readonly proxy: TransparentProxy;
  readonly forms: ElicitRequestFormParams[];
  /** Every message the proxy sent to the client, with the transport options it sent it with. */
  readonly sent: { message: JSONRPCMessage; options: TransportSendOptions | undefined }[];
  close(): Promise<void>;
}

/** Connects a client (declaring form elicitation when `answer` is given) to a new proxy. */
export async function connectThroughProxy(options: {
  config: ReturnType<typeof configFrom>;
  answer?: FormAnswer;
  upstreamTransport?: Transport;
  /** Whether to list tools right after connecting (default true). */
  list?: boolean;
  gateway?: TransparentProxyOptions['gateway'];
  /** Client capabilities to declare instead of the default (form elicitation when `answer` is given). */
  capabilities?: ClientCapabilities;
  /** Answers the upstream's sampling requests (declare `sampling` in `capabilities`). */
  sample?: (params: CreateMessageRequest['params']) => CreateMessageResult | Promise<CreateMessageResult>;
  /** The roots the client offers (declare `roots` in `capabilities`). */
  roots?: Root[];
  log?: (line: string) => void;
}): Promise<ProxySession> {
  const proxy = createTransparentProxy({
    config: options.config,
    principal: { id: 'test' },
    upstreamStderr: 'ignore',
    ...(options.upstreamTransport !== undefined && { upstreamTransport: options.upstreamTransport }),
    ...(options.gateway !== undefined && { gateway: options.gateway }),
    ...(options.log !== undefined && { log: options.log }),
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const sent: ProxySession['sent'] = [];
  const send = serverSide.send.bind(serverSide);
  serverSide.send = (message, sendOptions) => {
    sent.push({ message, options: sendOptions });
    return send(message, sendOptions);
  };
  await proxy.connect(serverSide);
  const forms: ElicitRequestFormParams[] = [];
  const client = new Client(
    { name: 'test-client', version: '1.0.0' },
    { capabilities: options.capabilities ?? (options.answer !== undefined ? { elicitation: { form: {} } } : {}) },
  );
  const { sample, roots } = options;
  if (sample !== undefined) client.setRequestHandler('sampling/createMessage', (request) => sample(request.params));
  if (roots !== undefined) client.setRequestHandler('roots/list', () => ({ roots }));
  const { answer } = options;
  if (answer !== undefined) {
    client.setRequestHandler('elicitation/create', async (request) => {
      if (!('requestedSchema' in request.params)) throw new Error('expected a form elicitation');
      forms.push(request.params);
      return answer(request.params);
    });
  }
  await client.connect(clientSide);
  // As every MCP client does before calling: what the session was listed is what it discovered (SPEC §3.5).
  if (options.list !== false) await client.request({ method: 'tools/list' }, ResultSchema);
  return {
    client,
    proxy,
    forms,
    sent,
    async close() {
      await client.close();
      await proxy.close();
    },
  };
}

/** Calls a tool through the raw request path and returns the result. */
export async function callTool(client: Client, name: string, args?: Record<string, unknown>): Promise<CallToolResult> {
  return client.request({ method: 'tools/call', params: { name, ...(args !== undefined && { arguments: args }) } });
}

/** The structured block a proxy returned, read from the text (present in every blocked result). */
export function blockedOf(result: CallToolResult): Record<string, unknown> {
  const first = result.content[0];
  if (first?.type !== 'text') throw new Error('expected a text block');
  return JSON.parse(first.text) as Record<string, unknown>;
}
