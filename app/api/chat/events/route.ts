import { appRoute, chatEventStream, requireChatSession, resumePointOf } from '@/lib/index';

export const dynamic = 'force-dynamic';

/** GET: the session's events as SSE, from `Last-Event-ID` (a reconnect) or the start (a reload). */
export const GET = appRoute(async (request, app) => {
  const sessionId = await requireChatSession(request, app.chat);
  return chatEventStream(app.chat, sessionId, { afterId: resumePointOf(request), signal: request.signal });
});
