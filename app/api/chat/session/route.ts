import { z } from 'zod';
import {
  appRoute,
  chatSessionCookie,
  checkOrigin,
  findChatSession,
  jsonResponse,
  maxChatBodyBytes,
  plannerLabel,
  readJsonBody,
} from '@/lib/index';

/** POST (no body): resumes this browser's chat session from its cookie, or starts one; says which agent runs. */
export const POST = appRoute(async (request, app) => {
  checkOrigin(request, app.origin);
  await readJsonBody(request, z.strictObject({}), maxChatBodyBytes);
  const planner = { ...app.chat.planner, label: plannerLabel(app.chat.planner) };
  if ((await findChatSession(request, app.chat)) !== undefined) return jsonResponse({ resumed: true, planner });
  const { sessionId } = await app.chat.createSession();
  return jsonResponse(
    { resumed: false, planner },
    { headers: { 'set-cookie': chatSessionCookie(sessionId, { secure: app.secureCookies }) } },
  );
});
