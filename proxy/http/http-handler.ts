import { randomUUID } from 'node:crypto';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Gateway } from '../gateway/types';
import { createSearchModeServer } from '../meta-tools/search-mode-server';

/** Options of {@link createHttpHandler}. */
export interface HttpHandlerOptions {
  /** `Host` header values accepted (`localhost:3333`): anything else is refused (DNS rebinding). */
  readonly allowedHosts: readonly string[];
  /** `Origin` header values accepted when a browser sends one. */
  readonly allowedOrigins: readonly string[];
  /** The endpoint's path; default `/mcp`. */
  readonly path?: string;
  /** Concurrent sessions kept; a new one beyond this is refused once idle ones are gone. Default 100. */
  readonly maxSessions?: number;
  /** A session with no request for this long is closed. Default 30 minutes. */
  readonly idleTimeoutMs?: number;
  /** Largest request body accepted, in bytes. Default 4 MiB. */
  readonly maxBodyBytes?: number;
}

/** A web-standard Streamable HTTP endpoint: `Request` in, `Response` out (Node adapter or a Next.js route). */
export interface HttpHandler {
  handle(request: Request): Promise<Response>;
  /** Sessions currently open. */
  readonly sessions: number;
  close(): Promise<void>;
}

interface Session {
  readonly transport: WebStandardStreamableHTTPServerTransport;
  lastSeen: number;
}

function jsonRpcError(status: number, message: string): Response {
  return Response.json({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }, { status });
}

/** Reads at most `limit` bytes of the body, or says why not. */
async function readBody(
  request: Request,
  limit: number,
): Promise<{ ok: true; text: string } | { ok: false; response: Response }> {
  const tooLarge = () => ({
    ok: false as const,
    response: jsonRpcError(413, `Request body larger than ${limit} bytes.`),
  });
  if (Number(request.headers.get('content-length') ?? 0) > limit) return tooLarge();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = request.body?.getReader();
  for (let chunk = await reader?.read(); chunk && !chunk.done; chunk = await reader?.read()) {
    size += chunk.value.byteLength;
    if (size > limit) {
      await reader?.cancel();
      return tooLarge();
    }
    chunks.push(chunk.value);
  }
  return { ok: true, text: Buffer.concat(chunks).toString('utf8') };
}

/**
 * Serves the search-mode face over Streamable HTTP with the SDK's web-standard transport: one MCP
 * session (and one discovery set) per `Mcp-Session-Id`, bounded in number and closed when idle,
 * a body limit, and `Host`/`Origin` checks so a web page cannot reach it through DNS rebinding.
 */
export function createHttpHandler(gateway: Gateway, options: HttpHandlerOptions): HttpHandler {
  const path = options.path ?? '/mcp';
  const maxSessions = options.maxSessions ?? 100;
  const idleTimeoutMs = options.idleTimeoutMs ?? 30 * 60_000;
  const limit = options.maxBodyBytes ?? 4 * 1024 * 1024;
  const hosts = new Set(options.allowedHosts.map((host) => host.toLowerCase()));
  const origins = new Set(options.allowedOrigins.map((origin) => origin.toLowerCase()));
  const sessions = new Map<string, Session>();
  /** Initialize requests between the bound check and their session's registration. */
  let opening = 0;

  function sweep(now: number): void {
    for (const [id, session] of sessions) {
      if (now - session.lastSeen >= idleTimeoutMs) {
        sessions.delete(id);
        void session.transport.close();
      }
    }
  }
  const sweeper = setInterval(() => sweep(Date.now()), Math.min(idleTimeoutMs, 60_000));
  sweeper.unref();

  async function open(request: Request): Promise<Response> {
    const body = await readBody(request, limit);
    if (!body.ok) return body.response;
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.text);
    } catch {
      return jsonRpcError(400, 'Parse error: the body is not valid JSON.');
    }
    if (!isInitializeRequest(parsed))
      return jsonRpcError(400, 'Bad request: start a session with an initialize request.');
    sweep(Date.now());
    // Sessions being opened count against the bound too: concurrent initializes cannot overshoot it.
    if (sessions.size + opening >= maxSessions) {
      return jsonRpcError(503, `Too many open sessions (${maxSessions}); close one or try again later.`);
    }
    opening++;
    try {
      const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        maxRequestBodySize: limit,
        onsessioninitialized: (id) => {
          sessions.set(id, { transport, lastSeen: Date.now() });
        },
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await createSearchModeServer(gateway).connect(transport);
      return await transport.handleRequest(request, { parsedBody: parsed });
    } finally {
      opening--;
    }
  }

  return {
    get sessions() {
      return sessions.size;
    },
    async handle(request) {
      const url = new URL(request.url);
      if (url.pathname !== path) return jsonRpcError(404, `Not found: the MCP endpoint is ${path}.`);
      const host = request.headers.get('host')?.toLowerCase();
      if (host === undefined || !hosts.has(host)) return jsonRpcError(403, 'Forbidden: unexpected Host header.');
      const origin = request.headers.get('origin');
      if (origin !== null && !origins.has(origin.toLowerCase())) {
        return jsonRpcError(403, 'Forbidden: unexpected Origin header.');
      }
      const sessionId = request.headers.get('mcp-session-id');
      if (sessionId === null) {
        return request.method === 'POST'
          ? open(request)
          : jsonRpcError(400, 'Bad request: unknown or missing Mcp-Session-Id.');
      }
      const session = sessions.get(sessionId);
      if (!session) return jsonRpcError(404, 'Session not found: start a new session with an initialize request.');
      session.lastSeen = Date.now();
      return session.transport.handleRequest(request);
    },
    async close() {
      clearInterval(sweeper);
      const open = [...sessions.values()];
      sessions.clear();
      await Promise.allSettled(open.map((session) => session.transport.close()));
    },
  };
}
