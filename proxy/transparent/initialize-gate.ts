import type {
  InitializeRequest,
  JSONRPCMessage,
  MessageExtraInfo,
  Transport,
  TransportSendOptions,
} from '@modelcontextprotocol/server';
import { isInitializeRequest, isJSONRPCRequest, ProtocolErrorCode } from '@modelcontextprotocol/server';

/** The client's `initialize` request as it arrived, id included. */
export type InitializeMessage = InitializeRequest & { readonly jsonrpc: '2.0'; readonly id: string | number };

/**
 * A client transport held until its `initialize` arrives (SPEC §3.10): the proxy must know the
 * client's capabilities before it opens the upstream connection that mirrors them, and must know
 * the upstream's capabilities before it can answer. {@link listen} starts the real transport and
 * reports the first `initialize`; everything received is kept until an MCP server connects to
 * this gate and {@link release} hands it over in order. Anything but `initialize` first is refused.
 */
export class InitializeGate implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;
  readonly #inner: Transport;
  readonly #held: [JSONRPCMessage, MessageExtraInfo | undefined][] = [];
  #initialize: InitializeMessage | undefined;

  constructor(inner: Transport) {
    this.#inner = inner;
  }

  /** The inner transport's session id (Streamable HTTP), read live. */
  get sessionId(): string | undefined {
    return this.#inner.sessionId;
  }

  /** Starts the real transport; `onInitialize` runs once, with the client's `initialize`. */
  async listen(onInitialize: (message: InitializeMessage) => void): Promise<void> {
    // Whoever owns the transport (the HTTP session table) may already listen for its close: keep them.
    const ownerClose = this.#inner.onclose;
    const ownerError = this.#inner.onerror;
    this.#inner.onclose = () => {
      ownerClose?.();
      this.onclose?.();
    };
    this.#inner.onerror = (error) => {
      ownerError?.(error);
      this.onerror?.(error);
    };
    this.#inner.onmessage = (message, extra) => {
      if (this.onmessage) {
        this.onmessage(message, extra);
        return;
      }
      if (this.#initialize === undefined) {
        if (!isInitializeRequest(message)) {
          // Nothing can be served before the session exists: a request is answered, the rest dropped.
          if (isJSONRPCRequest(message)) {
            void this.#inner
              .send({
                jsonrpc: '2.0',
                id: message.id,
                error: { code: ProtocolErrorCode.InvalidRequest, message: 'Send initialize first.' },
              })
              .catch((error: unknown) => this.onerror?.(error as Error));
          }
          return;
        }
        this.#initialize = message as InitializeMessage;
        this.#held.push([message, extra]);
        onInitialize(this.#initialize);
        return;
      }
      this.#held.push([message, extra]);
    };
    await this.#inner.start();
  }

  /** Already started by {@link listen}: connecting an MCP server to the gate starts nothing twice. */
  async start(): Promise<void> {}

  /** Hands everything held (the `initialize` first) to the server now connected. */
  release(): void {
    for (const [message, extra] of this.#held.splice(0)) this.onmessage?.(message, extra);
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    return this.#inner.send(message, options);
  }

  close(): Promise<void> {
    return this.#inner.close();
  }

  setProtocolVersion(version: string): void {
    this.#inner.setProtocolVersion?.(version);
  }
}
