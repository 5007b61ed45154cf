'use client';

import type { ChatEvent } from '@/lib/index';

/**
 * The chat's binding to its session (issue 26 defect 4). The server hands the page a secret when it
 * starts a session; the page keeps it in `sessionStorage` (readable by this origin alone, port
 * included, and per tab) and sends it as a header on every chat request and on the event stream.
 * Cookies are not used: a page on another port of this host can set them.
 */
const storageKey = 'emcp-chat-token';
/** The header the server reads the secret from (`chatTokenHeader` in `lib/web/chat-http.ts`). */
const tokenHeader = 'x-chat-token';

/** This tab's chat secret, if it has one. */
export function storedChatToken(): string | undefined {
  try {
    return sessionStorage.getItem(storageKey) ?? undefined;
  } catch {
    // Storage disabled: every load starts a new session, which is safe.
    return undefined;
  }
}

/** Keeps the secret of the session the server just started for this tab. */
export function storeChatToken(token: string): void {
  try {
    sessionStorage.setItem(storageKey, token);
  } catch {
    // Storage disabled: the session lasts as long as the page.
  }
}

/** The headers of a chat request: the secret, when this tab has one. */
export function chatHeaders(token: string | undefined): Record<string, string> {
  return token === undefined ? {} : { [tokenHeader]: token };
}

/** What the event stream tells the page. */
export interface ChatStreamHandlers {
  readonly onOpen: () => void;
  readonly onEvent: (event: ChatEvent) => void;
  /** The connection dropped; it is retried by itself, resuming after the last event seen. */
  readonly onDropped: () => void;
  /** The server no longer knows the session (401): the page must start a new one. */
  readonly onClosed: () => void;
}

/**
 * The session's Server-Sent Events over `fetch`, since `EventSource` cannot send the secret's
 * header. Reconnects after a drop with `Last-Event-ID`, as `EventSource` would; stops on `signal`.
 */
export function openChatStream(token: string, handlers: ChatStreamHandlers, signal: AbortSignal): void {
  let lastId = 0;
  let retryMs = 1000;
  const run = async (): Promise<void> => {
    while (!signal.aborted) {
      let response: Response | undefined;
      try {
        response = await fetch('/api/chat/events', {
          headers: { ...chatHeaders(token), accept: 'text/event-stream', 'last-event-id': String(lastId) },
          signal,
          cache: 'no-store',
        });
      } catch {
        response = undefined;
      }
      if (signal.aborted) return;
      if (response?.status === 401) return handlers.onClosed();
      if (response?.ok && response.body) {
        handlers.onOpen();
        try {
          await readEvents(response.body, {
            onEvent: (event) => {
              lastId = Math.max(lastId, event.id);
              handlers.onEvent(event);
            },
            onRetry: (ms) => {
              retryMs = ms;
            },
          });
        } catch {
          // A dropped connection: reconnect below.
        }
        if (signal.aborted) return;
      }
      handlers.onDropped();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, retryMs);
        signal.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  };
  void run();
}

/** Parses an SSE body: `data:` lines (one JSON event each, as the server frames them) and `retry:`. */
async function readEvents(
  body: ReadableStream<Uint8Array>,
  on: { readonly onEvent: (event: ChatEvent) => void; readonly onRetry: (ms: number) => void },
): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
    buffer += decoder.decode(chunk.value, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n');
      const retry = /^retry:\s*(\d+)$/m.exec(block);
      if (retry?.[1] !== undefined) on.onRetry(Number(retry[1]));
      if (data !== '') on.onEvent(JSON.parse(data) as ChatEvent);
      end = buffer.indexOf('\n\n');
    }
  }
}
