import { randomUUID } from 'node:crypto';
import type { JSONRPCMessage, RequestId, Transport } from '@modelcontextprotocol/server';
import {
  isInitializeRequest,
  isLegacyRequest,
  WebStandardStreamableHTTPServerTransport,
} from '@modelcontextprotocol/server';
import type { Gateway, Principal } from '../gateway/types';
import { type InputRounds, localInputRounds } from '../meta-tools/input-rounds';
import { createSearchModeServer } from '../meta-tools/search-mode-server';
import { createStatelessHandler, type StatelessLeg } from '../meta-tools/stateless-search-mode-server';
import { requestIdKey } from '../request-id-key';
import { type InboundToken, inboundPrincipals } from './inbound-tokens';

/** Options of {@link createHttpHandler}. */
export interface HttpHandlerOptions {
  /** `Host` header values accepted (`localhost:3333`): anything else is refused (DNS rebinding). */
  readonly allowedHosts: readonly string[];
  /** `Origin` header values accepted when a browser sends one. */
  readonly allowedOrigins: readonly string[];
  /** The endpoint's path; default `/mcp`. */
  readonly path?: string;
  /**
   * Concurrent sessions kept. A new one beyond this closes the least recently used idle session
   * (one with no request in flight); only when every session is busy is it refused (503).
   * Default 100.
   */
  readonly maxSessions?: number;
  /**
   * Concurrent sessions kept per remote address (when the caller passes `remoteAddress`): beyond
   * it the address's own least recently used idle session is closed, or the new one refused (429)
   * when all of them are busy. One client cannot take everyone's sessions. Default 25.
   */
  readonly maxSessionsPerAddress?: number;
  /** A session with no request for this long is closed. Default 30 minutes. */
  readonly idleTimeoutMs?: number;
  /** Largest request body accepted, in bytes. Default 4 MiB. */
  readonly maxBodyBytes?: number;
  /**
   * How questions to the person travel in both legs (SPEC §3.12): replicas behind one address
   * share the key and the ledger. Default: this process's own rounds.
   */
  readonly rounds?: InputRounds;
  /**
   * The inbound clients' bearer tokens (SPEC §3.5): a request must present one, and its name is
   * the principal (`token:<name>`). Absent: no authentication, and every client is `anonymous`.
   */
  readonly inboundTokens?: readonly InboundToken[];
}

/** What the server knows about a request beyond the `Request` itself. */
export interface HttpRequestContext {
  /** The peer's address (the Node adapter passes the socket's); enables the per-address cap. */
  readonly remoteAddress?: string;
  /**
   * The request's body, when the host kept it out of the `Request`: the Node adapter passes its
   * `IncomingMessage`, so the body is read off the socket once, after the checks and under the
   * limit, with no web stream in between. Absent: the `Request`'s own body.
   */
  readonly body?: AsyncIterable<Uint8Array>;
}

/** A web-standard Streamable HTTP endpoint: `Request` in, `Response` out (Node adapter or a Next.js route). */
export interface HttpHandler {
  handle(request: Request, context?: HttpRequestContext): Promise<Response>;
  /** Sessions currently open. */
  readonly sessions: number;
  /**
   * Stops taking requests and waits, at most `timeoutMs`, until every request already taken has
   * been answered. A request arriving meanwhile is refused with 503 (it never ran); the client's
   * answers to the server's own requests, its notifications and `DELETE` still go through.
   */
  drain(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

interface Session {
  readonly transport: WebStandardStreamableHTTPServerTransport;
  /** Who opened it: only that principal may use it (another's request finds no such session). */
  readonly principal: string;
  readonly remoteAddress: string | undefined;
  /** Requests of this session not answered yet; a session with any is busy, never idle. */
  readonly inFlight: Set<string>;
  lastSeen: number;
}

/** The requests (not notifications or responses) in a JSON-RPC message or batch. */
function requestsIn(body: unknown): { readonly id: RequestId; readonly method: unknown }[] {
  return (Array.isArray(body) ? body : [body]).flatMap((message: unknown) => {
    if (typeof message !== 'object' || message === null || !('method' in message) || !('id' in message)) return [];
    const { id, method } = message;
    return typeof id === 'string' || typeof id === 'number' ? [{ id, method }] : [];
  });
}

/** The ids of the requests in a JSON-RPC message or batch. */
function requestIds(body: unknown): RequestId[] {
  return requestsIn(body).map((request) => request.id);
}

/** `response`, with `sent` called once its body has been read out (written) or cancelled. */
function whenSent(response: Response, sent: () => void): Response {
  if (!response.body) {
    sent();
    return response;
  }
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const chunk = await reader.read();
      if (!chunk.done) return controller.enqueue(chunk.value);
      sent();
      controller.close();
    },
    cancel(reason) {
      sent();
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/**
 * The SDK's transport, told when a request has been answered: the session's in-flight ids (the
 * reused-id check and the idle test) follow the answers actually sent.
 */
class TrackedTransport extends WebStandardStreamableHTTPServerTransport {
  readonly inFlight = new Set<string>();

  override async send(message: JSONRPCMessage, options?: { relatedRequestId?: RequestId }): Promise<void> {
    try {
      await super.send(message, options);
    } finally {
      if (('result' in message || 'error' in message) && message.id !== undefined && message.id !== null) {
        this.inFlight.delete(requestIdKey(message.id));
      }
    }
  }
}

function jsonRpcError(status: number, message: string, id: RequestId | null = null): Response {
  return Response.json({ jsonrpc: '2.0', error: { code: -32000, message }, id }, { status });
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** Reads at most `limit` bytes of the body (`request`'s own unless `body` is given), or says why not. */
async function readBody(
  request: Request,
  body: AsyncIterable<Uint8Array> | undefined,
  limit: number,
): Promise<{ ok: true; text: string } | { ok: false; response: Response }> {
  const tooLarge = () => ({
    ok: false as const,
    response: jsonRpcError(413, `Request body larger than ${limit} bytes.`),
  });
  if (Number(request.headers.get('content-length') ?? 0) > limit) return tooLarge();
  const chunks: Uint8Array[] = [];
  let size = 0;
  // Node's web streams are async iterable (the DOM lib's type does not say so). Leaving the loop
  // early cancels the stream, or destroys Node's request: the rest is never read.
  for await (const chunk of body ?? (request.body as AsyncIterable<Uint8Array> | null) ?? []) {
    size += chunk.byteLength;
    if (size > limit) return tooLarge();
    chunks.push(chunk);
  }
  return { ok: true, text: Buffer.concat(chunks).toString('utf8') };
}

/**
 * Serves the search-mode face over Streamable HTTP with the SDK's web-standard transport: one MCP
 * session (and one discovery set) per `Mcp-Session-Id`, bounded in number and closed when idle,
 * a body limit, and `Host`/`Origin` checks so a web page cannot reach it through DNS rebinding.
 */
export function createHttpHandler(gateway: Gateway, options: HttpHandlerOptions): HttpHandler {
  const rounds = options.rounds ?? localInputRounds();
  return createSessionHttpHandler(
    (transport, principal) => createSearchModeServer(gateway, { principal, rounds }).connect(transport),
    options,
    createStatelessHandler(gateway, rounds),
  );
}

/** Serves one new session of `principal` on its transport. */
export type ConnectSession = (transport: Transport, principal: Principal) => Promise<void>;

/**
 * Serves a session per client over the Streamable HTTP handler (bounds, idle sweep, body limit,
 * `Host`/`Origin` checks): `connectSession` serves one new session on its transport. Search mode
 * connects a meta-tools server; transparent mode a proxy with its own upstream (SPEC §3.11), so
 * the session bound also bounds its upstream children. Closing a session closes its transport.
 * A session belongs to the principal that opened it. With a `stateless` leg, every request the
 * SDK classifies as 2026-07-28 goes there instead, after the same checks (SPEC §3.11): no session.
 */
export function createSessionHttpHandler(
  connectSession: ConnectSession,
  options: HttpHandlerOptions,
  stateless?: StatelessLeg,
): HttpHandler {
  const path = options.path ?? '/mcp';
  const maxSessions = options.maxSessions ?? 100;
  const maxPerAddress = options.maxSessionsPerAddress ?? 25;
  const idleTimeoutMs = options.idleTimeoutMs ?? 30 * 60_000;
  const limit = options.maxBodyBytes ?? 4 * 1024 * 1024;
  const hosts = new Set(options.allowedHosts.map((host) => host.toLowerCase()));
  const origins = new Set(options.allowedOrigins.map((origin) => origin.toLowerCase()));
  const principalOf = inboundPrincipals(options.inboundTokens);
  const sessions = new Map<string, Session>();
  /** Initialize requests between the bound check and their session's registration, per address ('' when unknown). */
  const opening = new Map<string, number>();
  const openingTotal = () => [...opening.values()].reduce((sum, count) => sum + count, 0);

  function drop(id: string, session: Session): void {
    sessions.delete(id);
    void session.transport.close();
  }

  function sweep(now: number): void {
    for (const [id, session] of sessions) {
      // A session waiting for an answer is not idle, however long the call takes.
      if (session.inFlight.size === 0 && now - session.lastSeen >= idleTimeoutMs) drop(id, session);
    }
  }
  const sweeper = setInterval(() => sweep(Date.now()), Math.min(idleTimeoutMs, 60_000));
  sweeper.unref();

  /** Closes the least recently used idle session among `candidates`; false when all are busy. */
  function evictIdle(candidates: readonly [string, Session][]): boolean {
    let oldest: [string, Session] | undefined;
    for (const entry of candidates) {
      if (entry[1].inFlight.size === 0 && (oldest === undefined || entry[1].lastSeen < oldest[1].lastSeen)) {
        oldest = entry;
      }
    }
    if (oldest) drop(...oldest);
    return oldest !== undefined;
  }

  /** Makes room for one more session from `address`, or says why not. */
  function admit(address: string | undefined): Response | undefined {
    sweep(Date.now());
    if (address !== undefined) {
      const own = [...sessions].filter(([, session]) => session.remoteAddress === address);
      // Sessions being opened count against the bounds too: concurrent initializes cannot overshoot them.
      if (own.length + (opening.get(address) ?? 0) >= maxPerAddress && !evictIdle(own)) {
        return jsonRpcError(
          429,
          `Too many open sessions from this address (${maxPerAddress}); close one or try again later.`,
        );
      }
    }
    if (sessions.size + openingTotal() >= maxSessions && !evictIdle([...sessions])) {
      return jsonRpcError(503, `Too many open sessions (${maxSessions}); close one or try again later.`);
    }
    return undefined;
  }

  async function open(
    request: Request,
    parsed: { readonly value: unknown },
    opener: { readonly address: string | undefined; readonly principal: Principal },
  ): Promise<Response> {
    const { address, principal } = opener;
    if (!isInitializeRequest(parsed.value))
      return jsonRpcError(400, 'Bad request: start a session with an initialize request.');
    const refused = admit(address);
    if (refused) return refused;
    const bucket = address ?? '';
    opening.set(bucket, (opening.get(bucket) ?? 0) + 1);
    try {
      const transport: TrackedTransport = new TrackedTransport({
        sessionIdGenerator: () => randomUUID(),
        maxRequestBodySize: limit,
        onsessioninitialized: (id) => {
          sessions.set(id, {
            transport,
            principal: principal.id,
            remoteAddress: address,
            inFlight: transport.inFlight,
            lastSeen: Date.now(),
          });
        },
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await connectSession(transport, principal);
      return await transport.handleRequest(request, { parsedBody: parsed.value });
    } finally {
      const count = (opening.get(bucket) ?? 1) - 1;
      if (count === 0) opening.delete(bucket);
      else opening.set(bucket, count);
    }
  }

  /**
   * A POST inside a session. The SDK's transport routes each answer by request id alone: a second
   * request reusing an id still in flight took over the first one's stream, and the first never
   * got its answer (issue 11, item 18). Such a request is refused with an error carrying the id.
   */
  async function post(request: Request, parsed: { readonly value: unknown }, session: Session): Promise<Response> {
    const ids = requestIds(parsed.value);
    const keys = ids.map(requestIdKey);
    const reused = ids.find((_, position) => {
      const key = keys[position] as string;
      return session.inFlight.has(key) || keys.indexOf(key) !== position;
    });
    if (reused !== undefined) {
      return jsonRpcError(
        409,
        `Request id ${JSON.stringify(reused)} is already in use in this session; use a new id.`,
        reused,
      );
    }
    for (const key of keys) session.inFlight.add(key);
    try {
      return await session.transport.handleRequest(request, { parsedBody: parsed.value });
    } catch (error) {
      for (const key of keys) session.inFlight.delete(key);
      throw error;
    } finally {
      session.lastSeen = Date.now();
    }
  }

  /** Where a request that passed the checks goes: the stateless leg, a new session or its own. */
  async function route(
    request: Request,
    parsed: { readonly value: unknown } | undefined,
    opener: { readonly address: string | undefined; readonly principal: Principal },
  ): Promise<Response> {
    const { principal } = opener;
    // A 2026-07-28 request carries its own version and state: the stateless leg, any replica.
    if (stateless !== undefined && !(await isLegacyRequest(request, parsed?.value))) {
      return stateless.handle(request, principal, parsed?.value);
    }
    const sessionId = request.headers.get('mcp-session-id');
    if (sessionId === null) {
      return parsed !== undefined
        ? open(request, parsed, opener)
        : jsonRpcError(400, 'Bad request: unknown or missing Mcp-Session-Id.');
    }
    const session = sessions.get(sessionId);
    // Another principal's session is answered exactly like an unknown one: its id opens nothing.
    if (!session || session.principal !== principal.id) {
      return jsonRpcError(404, 'Session not found: start a new session with an initialize request.');
    }
    session.lastSeen = Date.now();
    if (parsed !== undefined) return post(request, parsed, session);
    return session.transport.handleRequest(request);
  }

  /** Exchanges whose answer is still being written, each settling once it has been. */
  const answering = new Set<Promise<void>>();
  let draining = false;

  /** Serves one request: refused while draining, else routed and tracked until its answer is out. */
  async function serve(
    request: Request,
    parsed: { readonly value: unknown } | undefined,
    opener: { readonly address: string | undefined; readonly principal: Principal },
  ): Promise<Response> {
    const requests = parsed === undefined ? [] : requestsIn(parsed.value);
    if (draining && (request.method === 'GET' || requests.length > 0)) {
      return jsonRpcError(503, 'The proxy is shutting down: the request was not run. Try again.', requests[0]?.id);
    }
    // A listen stream, like a GET's, is answered only when it ends: it never holds the drain.
    if (!requests.some((entry) => entry.method !== 'subscriptions/listen')) return route(request, parsed, opener);
    let sent = () => {};
    const exchange = new Promise<void>((resolve) => {
      sent = resolve;
    });
    answering.add(exchange);
    void exchange.then(() => answering.delete(exchange));
    try {
      return whenSent(await route(request, parsed, opener), sent);
    } catch (error) {
      sent();
      throw error;
    }
  }

  return {
    get sessions() {
      return sessions.size;
    },
    async drain(timeoutMs) {
      draining = true;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(answering),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(timer);
    },
    async handle(request, context = {}) {
      const url = new URL(request.url);
      if (url.pathname !== path) return jsonRpcError(404, `Not found: the MCP endpoint is ${path}.`);
      const host = request.headers.get('host')?.toLowerCase();
      if (host === undefined || !hosts.has(host)) return jsonRpcError(403, 'Forbidden: unexpected Host header.');
      const origin = request.headers.get('origin');
      if (origin !== null && !origins.has(origin.toLowerCase())) {
        return jsonRpcError(403, 'Forbidden: unexpected Origin header.');
      }
      const principal = principalOf(request.headers.get('authorization'));
      if (principal === undefined) {
        return Response.json(
          {
            jsonrpc: '2.0',
            error: { code: -32001, message: 'Unauthorized: a valid bearer token is required.' },
            id: null,
          },
          { status: 401, headers: { 'www-authenticate': 'Bearer realm="extensible-mcp"' } },
        );
      }
      // A POST body is read once, under the limit, whichever leg serves it.
      let parsed: { readonly value: unknown } | undefined;
      if (request.method === 'POST') {
        const body = await readBody(request, context.body, limit);
        if (!body.ok) return body.response;
        const json = parseJson(body.text);
        if (!json.ok) return jsonRpcError(400, 'Parse error: the body is not valid JSON.');
        parsed = json;
      }
      return serve(request, parsed, { address: context.remoteAddress, principal });
    },
    async close() {
      clearInterval(sweeper);
      await stateless?.close();
      const open = [...sessions.values()];
      sessions.clear();
      await Promise.allSettled(open.map((session) => session.transport.close()));
    },
  };
}
