/**
 * A local Anthropic Messages API for the chat's Claude path: answers `POST /v1/messages` with
 * `stream: true` as server-sent events (text deltas and `tool_use` blocks whose input arrives as
 * `input_json_delta` chunks), so the real `@anthropic-ai/sdk` streams against it without the internet.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One content block of a scripted reply. */
export type ScriptedBlock =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'tool_use'; readonly name: string; readonly input: Record<string, unknown> };

/** One scripted assistant message. */
export interface ScriptedMessage {
  readonly content: readonly ScriptedBlock[];
  readonly stopReason: 'end_turn' | 'tool_use';
}

/** The scripted model's `search_tools` step. */
export const searchStep = (query: string): ScriptedMessage => ({
  content: [{ type: 'tool_use', name: 'search_tools', input: { query, top_k: 10 } }],
  stopReason: 'tool_use',
});

/** The scripted model's `call_tool` step. */
export const callStep = (tool: string, args: Record<string, unknown>): ScriptedMessage => ({
  content: [{ type: 'tool_use', name: 'call_tool', input: { tool_name: tool, arguments: args } }],
  stopReason: 'tool_use',
});

/** The request body as the SDK sent it (only the parts the tests read). */
export interface MessagesRequest {
  readonly model: string;
  readonly stream?: boolean;
  readonly tools?: ReadonlyArray<{ readonly name: string }>;
  readonly messages: ReadonlyArray<{ readonly role: string; readonly content: unknown }>;
}

/** A running fake. */
export interface FakeStreamingMessagesApi {
  readonly baseURL: string;
  readonly requests: MessagesRequest[];
  close(): Promise<void>;
}

/** Starts the fake on 127.0.0.1; `reply` scripts the assistant's next message from the request. */
export async function startFakeStreamingMessagesApi(
  reply: (request: MessagesRequest, index: number) => ScriptedMessage,
): Promise<FakeStreamingMessagesApi> {
  const requests: MessagesRequest[] = [];
  let toolUses = 0;
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    if (request.method !== 'POST' || request.url !== '/v1/messages') {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{}');
      return;
    }
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as MessagesRequest;
    requests.push(body);
    let scripted: ScriptedMessage;
    try {
      scripted = reply(body, requests.length - 1);
    } catch (error) {
      response
        .writeHead(500, { 'content-type': 'application/json' })
        .end(JSON.stringify({ type: 'error', error: { type: 'api_error', message: String(error) } }));
      return;
    }
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (event: Record<string, unknown> & { type: string }) =>
      response.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
    send({
      type: 'message_start',
      message: {
        id: `msg_${requests.length}`,
        type: 'message',
        role: 'assistant',
        model: body.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 10, output_tokens: 1 },
      },
    });
    scripted.content.forEach((block, index) => {
      if (block.type === 'text') {
        send({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
        // Several deltas per block, as the real API streams.
        for (const piece of block.text.match(/.{1,12}/gs) ?? []) {
          send({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } });
        }
      } else {
        toolUses += 1;
        send({
          type: 'content_block_start',
          index,
          content_block: { type: 'tool_use', id: `toolu_${toolUses}`, name: block.name, input: {} },
        });
        const json = JSON.stringify(block.input);
        const middle = Math.floor(json.length / 2);
        for (const part of [json.slice(0, middle), json.slice(middle)]) {
          send({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: part } });
        }
      }
      send({ type: 'content_block_stop', index });
    });
    send({
      type: 'message_delta',
      delta: { stop_reason: scripted.stopReason, stop_sequence: null },
      usage: { output_tokens: 20 },
    });
    send({ type: 'message_stop' });
    response.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The text of every `tool_result` block in the request's last user message. */
export function lastToolResults(
  request: MessagesRequest,
): ReadonlyArray<{ readonly text: string; readonly isError: boolean }> {
  const last = request.messages.at(-1);
  if (last?.role !== 'user' || !Array.isArray(last.content)) return [];
  return (last.content as { type: string; content?: unknown; is_error?: boolean }[])
    .filter((block) => block.type === 'tool_result')
    .map((block) => ({
      isError: block.is_error === true,
      text: Array.isArray(block.content)
        ? (block.content as { type: string; text?: string }[]).map((inner) => inner.text ?? '').join('\n')
        : String(block.content ?? ''),
    }));
}
