import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One scripted reply of the fake Messages API: HTTP status and JSON body. */
export type ScriptedReply = { status: number; body: unknown };

/** A running fake: base URL for the SDK, the requests it saw, and how to stop it. */
export type FakeMessagesApi = { baseURL: string; requests: unknown[]; close(): Promise<void> };

/**
 * Test support: a local Anthropic Messages API on 127.0.0.1 that answers `POST /v1/messages`
 * with scripted replies, so the real SDK is exercised without the internet.
 */
export async function startFakeMessagesApi(
  reply: (request: unknown) => ScriptedReply | 'hang',
): Promise<FakeMessagesApi> {
  const requests: unknown[] = [];
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    if (request.method !== 'POST' || request.url !== '/v1/messages') {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{}');
      return;
    }
    const body: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    requests.push(body);
    const scripted = reply(body);
    // 'hang' never answers, to exercise the clerk's timeout.
    if (scripted === 'hang') return;
    response.writeHead(scripted.status, { 'content-type': 'application/json' }).end(JSON.stringify(scripted.body));
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

/** A well-formed Messages API reply whose only content is a `propose_terms` tool call. */
export function toolUseReply(input: unknown): ScriptedReply {
  return {
    status: 200,
    body: {
      id: 'msg_fake',
      type: 'message',
      role: 'assistant',
      model: 'fake-model',
      content: [{ type: 'tool_use', id: 'toolu_fake', name: 'propose_terms', input }],
      stop_reason: 'tool_use',
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 10 },
    },
  };
}
