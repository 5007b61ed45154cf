import type { ChatService } from '../agent/types';
import { AppHttpError, readCookie } from './http';
import { eventStreamResponse } from './sse';

/** The chat session cookie: HttpOnly, SameSite=Strict, one per browser. */
export const chatCookieName = 'emcp-chat';
/** Largest body the chat routes read; a message is at most {@link maxChatMessageLength} characters. */
export const maxChatBodyBytes = 16 * 1024;
/** Longest user message accepted. */
export const maxChatMessageLength = 4000;
/** How long a chat cookie lives: a day, like the server-side history it names. */
const cookieMaxAgeSeconds = 24 * 60 * 60;
// What a chat cookie may hold: the service's session ids are opaque, unguessable tokens.
const sessionIdPattern = /^[A-Za-z0-9_-]{16,200}$/;

/** The `Set-Cookie` value that binds this browser to `sessionId`. */
export function chatSessionCookie(sessionId: string, options: { readonly secure: boolean }): string {
  return `${chatCookieName}=${sessionId}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${cookieMaxAgeSeconds}${options.secure ? '; Secure' : ''}`;
}

/** The live chat session the request's cookie names, or `undefined` (none, malformed, or unknown to the service). */
export async function findChatSession(request: Request, chat: ChatService): Promise<string | undefined> {
  const sessionId = readCookie(request, chatCookieName);
  if (sessionId === undefined || !sessionIdPattern.test(sessionId)) return undefined;
  return (await chat.hasSession(sessionId)) ? sessionId : undefined;
}

/** As {@link findChatSession}, refusing with 401 when there is none. */
export async function requireChatSession(request: Request, chat: ChatService): Promise<string> {
  const sessionId = await findChatSession(request, chat);
  if (sessionId === undefined) throw new AppHttpError(401, 'no chat session: reload the page to start one');
  return sessionId;
}

/** Where a (re)connecting event stream resumes: the SSE `Last-Event-ID` header, else `?after=`, else 0. */
export function resumePointOf(request: Request): number {
  const raw = request.headers.get('last-event-id') ?? new URL(request.url).searchParams.get('after') ?? '0';
  if (!/^\d{1,15}$/.test(raw.trim())) throw new AppHttpError(400, 'Last-Event-ID must be a non-negative event id');
  return Number(raw.trim());
}

/**
 * The session's events as Server-Sent Events: every event after `afterId`, then live ones, each
 * with its `id:` so the browser's reconnect resumes exactly where it stopped. Ends when the
 * client goes away (`signal`) or cancels the stream.
 */
export function chatEventStream(
  chat: ChatService,
  sessionId: string,
  options: { readonly afterId: number; readonly signal: AbortSignal },
): Response {
  return eventStreamResponse((signal) => chat.events(sessionId, { afterId: options.afterId, signal }), options.signal);
}
