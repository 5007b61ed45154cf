import process from 'node:process';
import type { Readable, Writable } from 'node:stream';
import { JSONRPCMessageSchema } from '@modelcontextprotocol/core';
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/server';
import { requestIdKey } from '../request-id-key';

/** Options of {@link StdioTransport}. */
export interface StdioTransportOptions {
  /** Largest message (one line) accepted, in bytes; a longer one is refused. Default 4 MiB, as over HTTP. */
  readonly maxMessageBytes?: number;
  readonly stdin?: Readable;
  readonly stdout?: Writable;
}

type RequestId = string | number;

const newline = 0x0a;
const quote = 0x22;
const backslash = 0x5c;
/** An `id` longer than this is not worth echoing back. */
const maxIdBytes = 256;

/**
 * Reads the top-level `id` and `method` of a JSON object streamed through it without keeping it:
 * an oversized message is dropped, yet its sender still gets an answer with its id (an SDK
 * client writes the id after the params, so the head of the line is not enough). Byte-wise is
 * safe: UTF-8 continuation bytes never equal an ASCII structural character.
 */
class TopLevelScanner {
  id: RequestId | undefined;
  hasMethod = false;
  #depth = 0;
  #inString = false;
  #escaped = false;
  #phase: 'key' | 'colon' | 'value' = 'key';
  #stringIsKey = false;
  #key: number[] = [];
  #currentKey = '';
  #value: number[] = [];

  feed(bytes: Uint8Array): void {
    for (const byte of bytes) this.#step(byte);
  }

  #step(byte: number): void {
    const topLevel = this.#depth === 1;
    const capturing = topLevel && this.#phase === 'value' && this.#currentKey === 'id';
    if (this.#inString) {
      if (this.#stringIsKey) this.#key.length < 16 && this.#key.push(byte);
      else if (capturing && this.#value.length <= maxIdBytes) this.#value.push(byte);
      if (this.#escaped) this.#escaped = false;
      else if (byte === backslash) this.#escaped = true;
      else if (byte === quote) {
        this.#inString = false;
        if (this.#stringIsKey) {
          this.#stringIsKey = false;
          this.#currentKey = Buffer.from(this.#key.slice(0, -1)).toString('latin1');
          this.#phase = 'colon';
        }
      }
      return;
    }
    switch (byte) {
      case quote:
        this.#inString = true;
        this.#stringIsKey = topLevel && this.#phase === 'key';
        this.#key = [];
        if (capturing) this.#value.push(byte);
        return;
      case 0x7b: // {
      case 0x5b: // [
        if (capturing) this.#value.push(0x7b); // an object or array id is not an id
        if (this.#depth === 0) this.#phase = 'key';
        this.#depth++;
        return;
      case 0x7d: // }
      case 0x5d: // ]
        if (topLevel) this.#finishValue();
        this.#depth--;
        return;
      case 0x3a: // :
        if (topLevel && this.#phase === 'colon') {
          this.#phase = 'value';
          this.#value = [];
        }
        return;
      case 0x2c: // ,
        if (topLevel) {
          this.#finishValue();
          this.#phase = 'key';
        }
        return;
      default:
        if (capturing && byte > 0x20 && this.#value.length <= maxIdBytes) this.#value.push(byte);
    }
  }

  #finishValue(): void {
    if (this.#phase !== 'value') return;
    if (this.#currentKey === 'method') this.hasMethod = true;
    if (this.#currentKey === 'id' && this.#value.length <= maxIdBytes) {
      const id = parseJson(Buffer.from(this.#value).toString('utf8'));
      if (typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id))) this.id = id;
    }
    this.#currentKey = '';
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The proxy's stdio server transport: newline-delimited JSON-RPC like the SDK's
 * `StdioServerTransport`, but a message it cannot take never ends the session. A line longer
 * than `maxMessageBytes` is discarded as it streams in (memory stays bounded) and answered with
 * a JSON-RPC error carrying its id; a line that is not JSON gets a parse error; a malformed
 * message an invalid-request error. The SDK's transport instead closed on an oversized line,
 * which ended the proxy silently with exit code 0 (issue 11, item 7).
 */
export class StdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly #stdin: Readable;
  readonly #stdout: Writable;
  readonly #limit: number;
  #line: Buffer[] = [];
  #size = 0;
  /** Set while the rest of an oversized line is being skipped. */
  #skipping: TopLevelScanner | undefined;
  #started = false;
  #closed = false;
  /** Set once {@link drain} began: a request read from now on is refused, not run. */
  #draining = false;
  /** The client's requests handed on and not answered yet (nor cancelled), by {@link requestIdKey}. */
  readonly #unanswered = new Set<string>();
  #answered: () => void = () => {};
  #settle: () => void = () => {};
  #settleEnded: () => void = () => {};
  /** Settles once the transport closed (`close()`), whoever owns `onclose`. */
  readonly closed = new Promise<void>((resolve) => {
    this.#settle = resolve;
  });
  /**
   * Settles at the end of stdin. The transport stays open, so the answers to the requests already
   * read can still be written: the owner {@link drain}s it, then closes it.
   */
  readonly ended = new Promise<void>((resolve) => {
    this.#settleEnded = resolve;
  });

  constructor(options: StdioTransportOptions = {}) {
    this.#stdin = options.stdin ?? process.stdin;
    this.#stdout = options.stdout ?? process.stdout;
    this.#limit = options.maxMessageBytes ?? 4 * 1024 * 1024;
  }

  readonly #onData = (chunk: Buffer): void => {
    let start = 0;
    while (start < chunk.length) {
      const end = chunk.indexOf(newline, start);
      const segment = chunk.subarray(start, end === -1 ? chunk.length : end);
      start = end === -1 ? chunk.length : end + 1;
      if (!this.#skipping && this.#size + segment.length > this.#limit) {
        // Too long: from here on the line is only scanned for its id, never stored.
        this.#skipping = new TopLevelScanner();
        for (const part of this.#line) this.#skipping.feed(part);
        this.#line = [];
        this.#size = 0;
      }
      if (this.#skipping) this.#skipping.feed(segment);
      else {
        this.#line.push(segment);
        this.#size += segment.length;
      }
      if (end !== -1) this.#endOfLine();
    }
  };

  readonly #onError = (error: Error): void => {
    this.onerror?.(error);
  };

  readonly #onEnd = (): void => {
    this.#settleEnded();
  };

  #endOfLine(): void {
    const skipped = this.#skipping;
    if (skipped) {
      this.#skipping = undefined;
      this.#refuseOversized(skipped);
      return;
    }
    const text = Buffer.concat(this.#line).toString('utf8').replace(/\r$/, '');
    this.#line = [];
    this.#size = 0;
    if (text.trim() === '') return;
    const parsed = parseJson(text);
    if (parsed === undefined) {
      this.#reply(null, -32700, 'Parse error: the message is not valid JSON.');
      return;
    }
    const message = JSONRPCMessageSchema.safeParse(parsed);
    if (message.success) {
      this.#receive(message.data);
      return;
    }
    const id = idOf(parsed);
    const isResponse = typeof parsed === 'object' && parsed !== null && ('result' in parsed || 'error' in parsed);
    if (isResponse && id !== null) this.onmessage?.(errorResponse(id, -32600, 'Invalid response from the client.'));
    else this.#reply(id, -32600, 'Invalid request: not a JSON-RPC 2.0 message.');
  }

  /** Hands a message on; a request is refused instead once the transport drains. */
  #receive(message: JSONRPCMessage): void {
    if ('method' in message && 'id' in message) {
      if (this.#draining) {
        this.#reply(message.id, -32000, 'The proxy is shutting down: the request was not run.');
        return;
      }
      // A listen stream is answered only when it ends: it never holds the drain.
      if (message.method !== 'subscriptions/listen') this.#unanswered.add(requestIdKey(message.id));
    } else if ('method' in message && message.method === 'notifications/cancelled') {
      // A cancelled request gets no answer: it no longer holds the drain.
      const requestId = (message.params as { requestId?: unknown } | undefined)?.requestId;
      if (typeof requestId === 'string' || typeof requestId === 'number') this.#settleOne(requestIdKey(requestId));
    }
    this.onmessage?.(message);
  }

  #settleOne(key: string): void {
    if (this.#unanswered.delete(key) && this.#unanswered.size === 0) this.#answered();
  }

  /**
   * Stops taking requests and waits, at most `timeoutMs`, until every request already read has
   * been answered. A request read meanwhile is answered with an error (it never ran); the
   * client's answers to the proxy's own requests and its notifications still go through.
   */
  drain(timeoutMs: number): Promise<void> {
    this.#draining = true;
    if (this.#unanswered.size === 0 || this.#closed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.#answered = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  #refuseOversized(scanned: TopLevelScanner): void {
    const text = `Message larger than ${this.#limit} bytes; refused.`;
    this.onerror?.(new Error(`stdio: ${text}`));
    if (scanned.hasMethod) {
      // A request gets its error; a notification (no id) has nobody to answer.
      if (scanned.id !== undefined) this.#reply(scanned.id, -32600, text);
    } else if (scanned.id !== undefined) {
      // An oversized answer to one of our own requests fails that request instead of leaving it pending.
      this.onmessage?.(errorResponse(scanned.id, -32600, text));
    } else this.#reply(null, -32600, text);
  }

  #reply(id: RequestId | null, code: number, message: string): void {
    if (this.#closed) return;
    this.#stdout.write(`${JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } })}\n`);
  }

  async start(): Promise<void> {
    if (this.#started) throw new Error('StdioTransport already started');
    this.#started = true;
    this.#stdin.on('data', this.#onData);
    this.#stdin.on('error', this.#onError);
    this.#stdin.once('end', this.#onEnd);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stdin.off('data', this.#onData);
    this.#stdin.off('error', this.#onError);
    this.#stdin.off('end', this.#onEnd);
    // Stop reading: a paused stdin no longer holds the process open.
    this.#stdin.pause();
    this.#line = [];
    this.#skipping = undefined;
    this.#settle();
    this.onclose?.();
  }

  send(message: JSONRPCMessage): Promise<void> {
    const answered = 'result' in message || 'error' in message ? message.id : undefined;
    return new Promise((resolve) => {
      // An answer counts once stdout took it: a drain that ends now loses nothing.
      const written = () => {
        if (answered !== undefined && answered !== null) this.#settleOne(requestIdKey(answered));
        resolve();
      };
      if (this.#stdout.write(`${JSON.stringify(message)}\n`)) written();
      else this.#stdout.once('drain', written);
    });
  }
}

function idOf(value: unknown): RequestId | null {
  if (typeof value !== 'object' || value === null || !('id' in value)) return null;
  const { id } = value;
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null;
}

function errorResponse(id: RequestId, code: number, message: string): JSONRPCMessage {
  return { jsonrpc: '2.0', id, error: { code, message } };
}
