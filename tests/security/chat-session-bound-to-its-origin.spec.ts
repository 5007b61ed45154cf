import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from '../e2e/support/app-server';
import { type E2eBrowser, launchBrowser, screenshot } from '../e2e/support/browser';

// Issue 26 defect 4, the attack itself in Chromium. Cookies do not isolate ports: a page on
// another localhost port planted its own chat-session cookie in the victim's browser; the victim's
// chat then opened the attacker's session, and the attacker read the victim's messages over the
// event stream. Here the attacker opens a session of its own from outside (as a script can), serves
// a page on another port that plants that session in every cookie it can, and lures the victim
// there first; the victim then chats about an address. The victim's chat must not be the
// attacker's session, and nothing the victim wrote may reach the attacker's stream.
let app: AppServer;
let lure: Server;
let lureOrigin: string;
let browser: E2eBrowser;
let victim: Page;
const victimAddress = '41 Victim Lane';
const attackerMarker = 'attacker was here first';

/** What the server handed the attacker when it opened its session: a cookie, a token, or both. */
interface Credential {
  readonly cookie?: string;
  readonly token?: string;
}
let attacker: Credential;

/** The attacker's requests carry every credential it holds. */
function attackerHeaders(credential: Credential): Record<string, string> {
  return {
    origin: app.origin,
    ...(credential.cookie === undefined ? {} : { cookie: credential.cookie }),
    ...(credential.token === undefined ? {} : { 'x-chat-token': credential.token }),
  };
}

/** Reads the attacker's event stream from the start until `until` appears; returns every event's text. */
async function attackerReads(until: string): Promise<string[]> {
  const response = await fetch(`${app.origin}/api/chat/events`, { headers: attackerHeaders(attacker) });
  expect(response.status).toBe(200);
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    while (!text.includes(until)) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += decoder.decode(chunk.value, { stream: true });
    }
  } finally {
    await reader.cancel();
  }
  return text.split('\n').filter((line) => line.startsWith('data: '));
}

beforeAll(async () => {
  app = await startAppServer();
  // 1. The attacker opens a chat session from outside and writes into it.
  const opened = await fetch(`${app.origin}/api/chat/session`, {
    method: 'POST',
    headers: { origin: app.origin, 'content-type': 'application/json' },
    body: '{}',
  });
  expect(opened.status).toBe(200);
  const setCookie = opened.headers.get('set-cookie');
  const body = (await opened.json()) as { token?: string };
  attacker = {
    ...(setCookie === null ? {} : { cookie: setCookie.split(';')[0] as string }),
    ...(body.token === undefined ? {} : { token: body.token }),
  };
  const wrote = await fetch(`${app.origin}/api/chat/messages`, {
    method: 'POST',
    headers: { ...attackerHeaders(attacker), 'content-type': 'application/json' },
    body: JSON.stringify({ text: attackerMarker }),
  });
  expect(wrote.status).toBe(200);
  // 2. Its lure on another port of the same host plants that session as the chat cookie, under
  //    the old cookie's name and the token's too: cookies set here reach the app's port as well.
  const planted = [
    ...(attacker.cookie === undefined ? [] : [attacker.cookie]),
    ...(attacker.token === undefined ? [] : [`emcp-chat=${attacker.token}`, `x-chat-token=${attacker.token}`]),
  ];
  lure = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(
      `<!doctype html><html lang="en"><title>Free pizza</title><body><p id="done">Free pizza!</p>
       <script>${planted.map((cookie) => `document.cookie = ${JSON.stringify(`${cookie}; path=/`)};`).join('')}
       document.getElementById('done').dataset.planted = 'yes';</script></body></html>`,
    );
  });
  await new Promise<void>((resolve) => lure.listen(0, '127.0.0.1', () => resolve()));
  lureOrigin = `http://localhost:${(lure.address() as AddressInfo).port}`;
  browser = await launchBrowser();
  victim = await browser.page();
});

afterAll(async () => {
  await browser?.close();
  await new Promise<void>((resolve) => (lure ? lure.close(() => resolve()) : resolve()));
  await app?.close();
});

describe('a chat session is bound to a secret only its own origin holds', () => {
  it('the lure on another port plants its cookies where the app will see them', async () => {
    await victim.goto(lureOrigin);
    await victim.locator('#done[data-planted="yes"]').waitFor();
    const cookies = await browser.context.cookies(app.origin);
    expect(cookies.map((cookie) => cookie.name)).toContain('emcp-chat');
  });

  it("the victim's chat does not open the attacker's session", async () => {
    await victim.goto(app.origin);
    await victim.locator('#chat-input:not([readonly])').waitFor();
    await victim.getByLabel('Message').fill(`a cheese slice to ${victimAddress}`);
    await victim.getByLabel('Message').press('Enter');
    // The victim's own turn: the order card with the victim's address, in the victim's chat.
    await victim
      .getByRole('article', { name: /Order from Main Street Pizza/ })
      .getByText(victimAddress)
      .waitFor();
    await screenshot(victim, 'chat-session-not-taken-over');
    expect(await victim.getByText(attackerMarker).count()).toBe(0);
  });

  it("the attacker's event stream never carries what the victim wrote", async () => {
    // A second message of its own marks the end of everything its session holds so far.
    const probe = 'attacker probe after the victim ordered';
    const wrote = await fetch(`${app.origin}/api/chat/messages`, {
      method: 'POST',
      headers: { ...attackerHeaders(attacker), 'content-type': 'application/json' },
      body: JSON.stringify({ text: probe }),
    });
    // The attacker's own session may still be busy with its first turn: either way its stream says so.
    expect([200, 409]).toContain(wrote.status);
    const events = await attackerReads(wrote.status === 200 ? probe : attackerMarker);
    expect(events.join('\n')).toContain(attackerMarker);
    expect(events.join('\n')).not.toContain(victimAddress);
  });

  it("a reload in the victim's tab resumes the victim's own conversation (the secret survives in sessionStorage)", async () => {
    await victim.reload();
    await victim.locator('#chat-input:not([readonly])').waitFor();
    await victim
      .getByRole('article', { name: /Order from Main Street Pizza/ })
      .getByText(victimAddress)
      .waitFor();
    expect(await victim.getByText(attackerMarker).count()).toBe(0);
  });

  it('the planted cookie alone opens nothing: without the tab secret every chat route is refused', async () => {
    const cookie = (await browser.context.cookies(app.origin)).map((each) => `${each.name}=${each.value}`).join('; ');
    for (const [path, init] of [
      ['/api/chat/events', { method: 'GET' }],
      ['/api/chat/messages', { method: 'POST', body: JSON.stringify({ text: 'hello' }) }],
      ['/api/chat/elicitation', { method: 'POST', body: JSON.stringify({ elicitationId: 'x', action: 'cancel' }) }],
    ] as const) {
      const response = await fetch(`${app.origin}${path}`, {
        ...init,
        headers: { cookie, origin: app.origin, 'content-type': 'application/json' },
      });
      expect(response.status, path).toBe(401);
    }
  });
});
