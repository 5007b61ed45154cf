/**
 * Issue 31 acceptance: transparent mode relays every content type and every round trip to a
 * 2026-07-28 client that never lists first, through the real CLI over loopback HTTP and a real
 * 2025 upstream process. The client cannot be sent requests in the middle of its call, so the
 * upstream's form, sampling request and roots listing reach it as `input_required` rounds while
 * the call waits in the proxy; progress and log messages travel on its request's stream.
 */
import {
  Client,
  type ElicitRequestFormParams,
  LOG_LEVEL_META_KEY,
  type LoggingMessageNotification,
  type Progress,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupStack } from '../gateway/support';
import { ASKING_SERVER, startHttpProxy, writeTemporary } from './cli-process';

const cleanups = cleanupStack();
afterEach(() => cleanups.run());

const config = `upstream:
  command: ${JSON.stringify(process.execPath)}
  args: ${JSON.stringify(['--import', 'tsx', ASKING_SERVER, 'upstream'])}
  protocol: 2025-11-25
`;
const ROOTS = [{ uri: 'file:///orders', name: 'Orders' }];

async function sessionless(url: string) {
  const forms: ElicitRequestFormParams[] = [];
  const logged: LoggingMessageNotification['params'][] = [];
  const client = new Client(
    { name: 'sessionless', version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      capabilities: { elicitation: { form: {} }, sampling: {}, roots: {} },
    },
  );
  client.setRequestHandler('elicitation/create', (request) => {
    forms.push(request.params as ElicitRequestFormParams);
    return { action: 'accept', content: { address: '1 Main St' } };
  });
  client.setRequestHandler('sampling/createMessage', () => ({
    model: 'test-model',
    role: 'assistant',
    content: { type: 'text', text: 'ring twice' },
  }));
  client.setRequestHandler('roots/list', () => ({ roots: ROOTS }));
  client.setNotificationHandler('notifications/message', (notification) => {
    logged.push(notification.params);
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  cleanups.push(() => client.close());
  expect(client.getProtocolEra()).toBe('modern');
  return { client, forms, logged };
}

const textOf = (result: unknown) =>
  ((result as { content?: { type: string; text?: string }[] }).content ?? []).map((block) => block.text ?? '').join('');

describe('transparent mode relays every content type and round trip to a 2026-07-28 client', () => {
  it('content types, a form, sampling, roots, progress and logging, with no listing first', async () => {
    const proxy = await startHttpProxy(await writeTemporary('config.yaml', config));
    cleanups.push(() => proxy.stop());
    const { client, forms, logged } = await sessionless(proxy.url);

    const media = await client.callTool({ name: 'media', arguments: {} });
    expect((media.content as { type: string }[]).map((block) => block.type)).toEqual([
      'text',
      'image',
      'audio',
      'resource',
      'resource_link',
    ]);
    expect(media.content).toContainEqual({
      type: 'image',
      data: expect.stringMatching(/^iVBOR/),
      mimeType: 'image/png',
    });
    expect(media.content).toContainEqual({
      type: 'resource',
      resource: { uri: 'memo://order/1', mimeType: 'text/plain', text: 'order one' },
    });

    // The upstream asks twice during one call: a form, then its client's model.
    const delivered = await client.callTool({ name: 'deliver', arguments: { size: 'large' } });
    expect(textOf(delivered)).toBe('delivering a large pizza to 1 Main St; note: ring twice');
    expect(forms.map((form) => form.message)).toEqual(['Where should the large pizza go?']);

    expect(JSON.parse(textOf(await client.callTool({ name: 'list_roots', arguments: {} })))).toEqual(ROOTS);

    // A 2026 client asks for log messages per request, with the level in the request's envelope.
    const progress: Progress[] = [];
    const worked = await client.callTool(
      { name: 'work', arguments: { steps: 3 }, _meta: { [LOG_LEVEL_META_KEY]: 'info' } },
      { onprogress: (update) => progress.push(update) },
    );
    expect(textOf(worked)).toBe('worked 3 steps');
    expect(progress.map((update) => update.progress)).toEqual([1, 2, 3]);
    expect(logged).toContainEqual(expect.objectContaining({ level: 'info', data: 'working in 3 steps' }));
  });
});
