import type { CallToolResult } from '@modelcontextprotocol/client';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GET as didDocument } from '../../app/.well-known/did.json/route';
import { GET as chatEvents } from '../../app/api/chat/events/route';
import { POST as sendMessage } from '../../app/api/chat/messages/route';
import { POST as openSession } from '../../app/api/chat/session/route';
import { POST as approvalOptions } from '../../app/api/identity/approval/options/route';
import { POST as approvalVerify } from '../../app/api/identity/approval/verify/route';
import { GET as pending } from '../../app/api/identity/pending/route';
import { POST as registrationOptions } from '../../app/api/identity/registration/options/route';
import { POST as registrationVerify } from '../../app/api/identity/registration/verify/route';
import { GET as identitySession } from '../../app/api/identity/session/route';
import { DELETE as mcpDelete, GET as mcpGet, POST as mcpPost } from '../../app/mcp/route';
import { readHouseholdEnv } from '../../lib/env';
import { type ChatEvent, createHouseholdApp, type HouseholdApp, setHouseholdApp } from '../../lib/index';
import { createAppChatService } from '../../lib/web/chat-wiring';
import { createSoftwareAuthenticator } from '../identity/software-authenticator';
import { startTestHousehold, type TestHousehold } from '../payments/household';
import { cookieOf, origin, readEvents, request } from './fake-chat';

// The app's routes over the real household (the shop over stdio, payments under family-spend) and
// the real chat service with the offline planner: the child enrols and approves through the
// identity routes, the chat runs through the chat routes, and the order completes by itself.
const token = 'app-test-token-0123456789';
let household: TestHousehold;
let app: HouseholdApp;

beforeAll(async () => {
  household = await startTestHousehold({ enrol: false });
  const env = readHouseholdEnv({ EXTENSIBLE_MCP_DATA: household.dataDir });
  app = createHouseholdApp({
    runtime: household.runtime,
    env,
    chat: createAppChatService(household.runtime, env),
    httpTokens: [{ name: 'mcp', token }],
  });
  setHouseholdApp(app);
});
afterAll(async () => {
  setHouseholdApp(undefined);
  await app?.mcp.close();
  await app?.chat.close();
  await household?.close();
});

async function json(response: Response): Promise<Record<string, unknown>> {
  return (await response.json()) as Record<string, unknown>;
}

describe('the household app', () => {
  it('a cheese slice: chat routes → pending in the child window → passkey approval → the receipt, by itself', async () => {
    // The child enrols in its window with the code printed at start.
    const authenticator = createSoftwareAuthenticator({ origin, rpId: 'localhost' });
    const code = household.runtime.identity.codes.find((issued) => issued.role === 'child')?.code as string;
    const started = await json(
      await registrationOptions(request('/api/identity/registration/options', { body: JSON.stringify({ code }) })),
    );
    const enrolled = await registrationVerify(
      request('/api/identity/registration/verify', {
        body: JSON.stringify({
          ceremonyId: started.ceremonyId,
          response: authenticator.register(started.options as never),
        }),
      }),
    );
    expect(enrolled.status).toBe(200);
    const child = cookieOf(enrolled);
    expect(child).toMatch(/^emcp-session-child=/);
    const signedIn = await identitySession(request('/api/identity/session?as=child', { method: 'GET', cookie: child }));
    expect(await json(signedIn)).toMatchObject({ signedIn: true, role: 'child' });

    // The chat: a session, a message, and its events as SSE.
    const session = await openSession(request('/api/chat/session'));
    const opened = (await json(session)) as { token: string };
    expect(opened).toMatchObject({
      resumed: false,
      planner: { kind: 'offline', label: 'Offline planner — no API key needed' },
    });
    const chat = opened.token;
    const sent = await sendMessage(
      request('/api/chat/messages', { token: chat, body: '{"text":"a cheese slice to 12 Main St"}' }),
    );
    expect(sent.status).toBe(200);
    const stream = await chatEvents(request('/api/chat/events', { method: 'GET', token: chat }));
    const untilPending = await readEvents(stream, (seen) =>
      seen.some(({ data }) => data.type === 'approval' && data.status === 'pending'),
    );
    const order = untilPending.find(({ data }) => data.type === 'order')?.data as Extract<ChatEvent, { type: 'order' }>;
    expect(order).toMatchObject({ totalCents: 400, deliverTo: '12 Main St' });
    // SSE ids are the events' own ids, in order.
    expect(untilPending.map(({ id }) => Number(id))).toEqual(untilPending.map(({ data }) => data.id));

    // The child window sees the true terms, decoded from the signed invoice.
    const waiting = await json(
      await pending(request('/api/identity/pending?as=child', { method: 'GET', cookie: child })),
    );
    const approvals = waiting.approvals as { approvalId: string; terms: Record<string, unknown> }[];
    expect(approvals).toHaveLength(1);
    expect(approvals[0]?.terms).toMatchObject({ invoiceId: order.invoiceId, totalCents: 400, deliverTo: '12 Main St' });

    // Approve with the passkey, through the routes.
    const approvalId = approvals[0]?.approvalId as string;
    const assertion = await json(
      await approvalOptions(
        request('/api/identity/approval/options?as=child', { cookie: child, body: JSON.stringify({ approvalId }) }),
      ),
    );
    const approved = await approvalVerify(
      request('/api/identity/approval/verify?as=child', {
        cookie: child,
        body: JSON.stringify({
          ceremonyId: assertion.ceremonyId,
          response: authenticator.assert(assertion.options as never),
        }),
      }),
    );
    expect(await json(approved)).toMatchObject({ approvalId, role: 'child' });

    // The turn resumes by itself; a reconnect from the last id seen gets the rest.
    const lastId = untilPending.at(-1)?.id as string;
    const resumed = await chatEvents(
      request('/api/chat/events', { method: 'GET', token: chat, headers: { 'last-event-id': lastId } }),
    );
    const rest = await readEvents(resumed, (seen) => seen.some(({ data }) => data.type === 'turn-ended'));
    expect(Number(rest[0]?.id)).toBe(Number(lastId) + 1);
    expect(rest.find(({ data }) => data.type === 'receipt')?.data).toMatchObject({
      invoiceId: order.invoiceId,
      amountCents: 400,
    });
    expect(rest.find(({ data }) => data.type === 'turn-ended')?.data).toMatchObject({ reason: 'done' });
    const after = await json(
      await pending(request('/api/identity/pending?as=child', { method: 'GET', cookie: child })),
    );
    expect(after.approvals).toEqual([]);
  });

  it('identity routes refuse a foreign Origin, a malformed body and a missing session', async () => {
    const foreign = await registrationOptions(
      request('/api/identity/registration/options', { origin: 'http://evil.example', body: '{"code":"x"}' }),
    );
    expect(foreign.status).toBe(403);
    const malformed = await registrationOptions(request('/api/identity/registration/options', { body: '{"code":' }));
    expect(malformed.status).toBe(400);
    const noSession = await pending(request('/api/identity/pending?as=parent', { method: 'GET' }));
    expect(noSession.status).toBe(401);
    expect(await json(noSession)).toEqual({ error: 'not signed in as parent' });
    // The parent's code is still unused: none of that spent it.
    expect(await household.runtime.identity.store.identity.passkeys.listByRole('parent')).toEqual([]);
  });

  it('serves the household admin DID document', async () => {
    const response = await didDocument(request('/.well-known/did.json', { method: 'GET' }));
    const document = await json(response);
    expect(document.id).toBe('did:web:localhost%3A3000');
    expect(document).toEqual(JSON.parse(JSON.stringify(household.runtime.identity.household.adminDocument)));
  });

  it('/mcp: an SDK client with the token searches and gets a signed invoice; without it, 401', async () => {
    const route = (input: string | URL, init?: RequestInit) => {
      const routed = new Request(input, init);
      const handler = routed.method === 'GET' ? mcpGet : routed.method === 'DELETE' ? mcpDelete : mcpPost;
      return handler(new Request(routed, { headers: new Headers([...routed.headers, ['host', 'localhost:3000']]) }));
    };
    const connect = async (authorization?: string) => {
      const client = new Client({ name: 'app-test', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${origin}/mcp`), {
          fetch: route,
          ...(authorization === undefined ? {} : { requestInit: { headers: { authorization } } }),
        }),
      );
      return client;
    };
    await expect(connect()).rejects.toThrow(/401|Unauthorized/);
    await expect(connect('Bearer app-test-token-0123456789x')).rejects.toThrow(/401|Unauthorized/);

    const client = await connect(`Bearer ${token}`);
    try {
      await client.callTool({ name: 'search_tools', arguments: { query: 'pizza invoice order', top_k: 50 } });
      const invoice = (await client.callTool({
        name: 'call_tool',
        arguments: {
          tool_name: 'pizza__request_invoice',
          arguments: { items: [{ sku: 'cheese-slice', qty: 1 }], deliverTo: '1 Elm St' },
        },
      })) as CallToolResult;
      expect(invoice.isError).toBeFalsy();
      const text = invoice.content[0]?.type === 'text' ? invoice.content[0].text : '';
      expect(JSON.parse(text)).toMatchObject({ invoice: expect.stringMatching(/^ey/) });
    } finally {
      await client.close();
    }
  });
});
