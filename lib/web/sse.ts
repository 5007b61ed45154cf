/** How often an idle stream sends a comment, so proxies and browsers keep the connection open. */
const keepAliveMs = 15_000;

/**
 * Server-Sent Events from an async source of events that carry their own increasing `id`, so the
 * browser's reconnect (`Last-Event-ID`) resumes exactly where it stopped. The source gets a signal
 * that aborts when the client goes away or cancels; the stream ends when the source does.
 */
export function eventStreamResponse<Event extends { readonly id: number }>(
  source: (signal: AbortSignal) => AsyncIterable<Event>,
  signal: AbortSignal,
): Response {
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  const encoder = new TextEncoder();
  let keepAlive: ReturnType<typeof setInterval> | undefined;
  const finish = () => {
    clearInterval(keepAlive);
    signal.removeEventListener('abort', onAbort);
    stop.abort();
  };
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      // The browser retries after a second when the connection drops.
      controller.enqueue(encoder.encode('retry: 1000\n\n'));
      keepAlive = setInterval(() => controller.enqueue(encoder.encode(': keep-alive\n\n')), keepAliveMs);
      try {
        for await (const event of source(stop.signal)) {
          if (stop.signal.aborted) break;
          controller.enqueue(encoder.encode(serverSentEvent(event)));
        }
        if (!stop.signal.aborted) controller.close();
      } catch (error) {
        if (!stop.signal.aborted) controller.error(error);
      } finally {
        finish();
      }
    },
    cancel() {
      finish();
    },
  });
  return new Response(body, {
    headers: {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    },
  });
}

/** One event in SSE framing: `id:` then the JSON on one `data:` line (JSON never contains a raw newline). */
export function serverSentEvent(event: { readonly id: number }): string {
  return `id: ${event.id}\ndata: ${JSON.stringify(event)}\n\n`;
}
