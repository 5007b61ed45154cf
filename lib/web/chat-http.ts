import type { ChatService } from '../agent/types';
import { AppHttpError } from './http';
import { eventStreamResponse } from './sse';

/**
 * The header every chat request carries its session's secret in (issue 26 defect 4). The page keeps
 * the secret in `sessionStorage`, which only this origin (scheme, host *and port*) can read; a
 * cookie would not do, since a page on another port of the same host can set this origin's
 * cookies. A header is also never sent by the browser on its own, so no other page can make the
 * browser present it.
 */
export const chatTokenHeader = 'x-chat-token';
/** Largest body the chat routes read; a message is at most {@link maxChatMessageLength} characters. */
export const maxChatBodyBytes = 16 * 1024;
/** Longest user message accepted. */
export const maxChatMessageLength = 4000;
// What a chat secret looks like: 32 random bytes, base64url.
const secretPattern = /^[A-Za-z0-9_-]{43}$/;

/** The live chat session the request's secret opens, or `undefined` (none, malformed, or unknown to the service). */
export async function findChatSession(request: Request, chat: ChatService): Promise<string | undefined> {
  const secret = request.headers.get(chatTokenHeader)?.trim();
  if (secret === undefined || !secretPattern.test(secret)) return undefined;
  return chat.sessionOf(secret);
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
