import { randomBytes, randomUUID } from 'node:crypto';
import type { ChatEvent, ChatEventBody, ChatService, HouseholdApp } from '../../lib/index';
import { createMcpEndpoint } from '../../lib/index';
import { createShopMcpEndpoint } from '../../lib/web/shop-mcp-endpoint';
import type { Gateway } from '../../proxy/index';

/** The origin the fake app serves. */
export const origin = 'http://localhost:3000';

/** A ChatService that records what the routes asked of it, with a session log the test appends to. */
export interface FakeChat extends ChatService {
  readonly calls: string[];
  /** Every secret `sessionOf` was asked about. */
  readonly asked: string[];
  /** Appends an event to a session's log and wakes its readers. */
  push(sessionId: string, body: ChatEventBody): void;
  /** What `send` answers next; default accepted. */
  refuseSends(reason: string | undefined): void;
}

export function createFakeChat(): FakeChat {
  const logs = new Map<string, ChatEvent[]>();
  const secrets = new Map<string, string>();
  const waiters = new Set<() => void>();
  const calls: string[] = [];
  const asked: string[] = [];
  let refusal: string | undefined;
  const wake = () => {
    for (const waiter of [...waiters]) waiter();
  };
  return {
    calls,
    asked,
    planner: { kind: 'offline' },
    push(sessionId, body) {
      const log = logs.get(sessionId);
      if (!log) throw new Error('no such session');
      log.push({ id: log.length + 1, at: new Date().toISOString(), ...body } as ChatEvent);
      wake();
    },
    refuseSends(reason) {
      refusal = reason;
    },
    async createSession() {
      calls.push('createSession');
      const sessionId = randomUUID();
      const secret = randomBytes(32).toString('base64url');
      logs.set(sessionId, []);
      secrets.set(secret, sessionId);
      return { sessionId, secret };
    },
    async hasSession(sessionId) {
      return logs.has(sessionId);
    },
    async sessionOf(secret) {
      asked.push(secret);
      return secrets.get(secret);
    },
    async send(sessionId, text) {
      calls.push(`send:${text}`);
      if (refusal !== undefined) return { accepted: false, reason: refusal };
      this.push(sessionId, { type: 'user-message', text });
      return { accepted: true };
    },
    async *events(sessionId, { afterId, signal }) {
      let next = afterId;
      const log = logs.get(sessionId) ?? [];
      while (!signal.aborted) {
        for (const event of log.filter((candidate) => candidate.id > next)) {
          next = event.id;
          yield event;
        }
        await new Promise<void>((resolve) => {
          const done = () => {
            waiters.delete(done);
            signal.removeEventListener('abort', done);
            resolve();
          };
          waiters.add(done);
          signal.addEventListener('abort', done, { once: true });
        });
      }
    },
    async answerElicitation(_sessionId, answer) {
      calls.push(`answer:${answer.elicitationId}:${answer.action}:${JSON.stringify(answer.content ?? null)}`);
      return answer.elicitationId === 'form-1'
        ? { accepted: true }
        : { accepted: false, reason: 'That form is not waiting for an answer.' };
    },
    async close() {
      calls.push('close');
    },
  };
}

/** A household app around the fake chat: no runtime; identity routes are not used by these tests. */
export function createFakeApp(chat: ChatService): HouseholdApp {
  const unused = async () => new Response('unused', { status: 599 });
  return {
    origin,
    chat,
    searchMode: () => 'loading',
    identity: {
      registrationOptions: unused,
      registrationVerify: unused,
      signInOptions: unused,
      signInVerify: unused,
      session: unused,
      pending: unused,
      approvalOptions: unused,
      approvalVerify: unused,
      callApprovalOptions: unused,
      callApprovalVerify: unused,
      callDecline: unused,
      decline: unused,
      allowances: unused,
      allowanceOptions: unused,
      allowanceVerify: unused,
      allowanceRevoke: unused,
      household: unused,
      householdUpdate: unused,
      signOut: unused,
    },
    // No token: the endpoint must answer 404 without touching the gateway.
    mcp: createMcpEndpoint({ gateway: {} as Gateway, origin, tokens: [] }),
    shopMcp: createShopMcpEndpoint({ shop: undefined, origin, tokens: [] }),
    adminDidDocument: { '@context': [], id: 'did:web:localhost%3A3000', verificationMethod: [] } as never,
    // An empty log and no orders: the trust surfaces have their own tests over a real store.
    log: { after: async () => [], head: async () => ({ rowId: 0, hash: '' }), subscribe: () => () => undefined },
    audit: { listOrders: async () => [], auditOrder: async () => undefined },
    close: async () => undefined,
  };
}

/** A request to one of the app's routes, from the app's own origin unless told otherwise. */
export function request(
  path: string,
  init: {
    method?: string;
    body?: string | ReadableStream<Uint8Array>;
    origin?: string | null;
    cookie?: string;
    /** The chat session's secret, sent as the page sends it (`x-chat-token`). */
    token?: string;
    headers?: Record<string, string>;
  } = {},
): Request {
  const headers = new Headers(init.headers);
  const from = init.origin === undefined ? origin : init.origin;
  if (from !== null) headers.set('origin', from);
  if (init.cookie !== undefined) headers.set('cookie', init.cookie);
  if (init.token !== undefined) headers.set('x-chat-token', init.token);
  if (typeof init.body === 'string') headers.set('content-type', 'application/json');
  return new Request(`${origin}${path}`, {
    method: init.method ?? 'POST',
    headers,
    ...(init.body === undefined ? {} : { body: init.body }),
    ...(init.body instanceof ReadableStream ? { duplex: 'half' } : {}),
  } as RequestInit);
}

/** The `name=value` part of a Set-Cookie header (the approval windows' identity session). */
export function cookieOf(response: Response): string {
  const header = response.headers.get('set-cookie') ?? '';
  return header.split(';')[0] ?? '';
}

/** Reads SSE frames from a response body until `until` says stop; returns the parsed events with their `id:` lines. */
export async function readEvents<Data = ChatEvent>(
  response: Response,
  until: (events: readonly { id: string; data: Data }[]) => boolean,
): Promise<{ id: string; data: Data }[]> {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  const events: { id: string; data: Data }[] = [];
  let buffer = '';
  try {
    while (!until(events)) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end = buffer.indexOf('\n\n');
      while (end >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const id = /^id: (.*)$/m.exec(frame)?.[1];
        const data = /^data: (.*)$/m.exec(frame)?.[1];
        if (id !== undefined && data !== undefined) events.push({ id, data: JSON.parse(data) as Data });
        end = buffer.indexOf('\n\n');
      }
    }
  } finally {
    await reader.cancel();
  }
  return events;
}
