import { z } from 'zod';
import {
  appRoute,
  checkOrigin,
  findChatSession,
  jsonResponse,
  maxChatBodyBytes,
  plannerLabel,
  readJsonBody,
} from '@/lib/index';

/**
 * POST (no body): resumes the session whose secret the request carries (the `x-chat-token` header,
 * which the page keeps in `sessionStorage`), or starts one and hands its secret to the page, once.
 * No cookie: another port of this host could plant one (issue 26 defect 4).
 */
export const POST = appRoute(async (request, app) => {
  checkOrigin(request, app.origin);
  await readJsonBody(request, z.strictObject({}), maxChatBodyBytes);
  const planner = { ...app.chat.planner, label: plannerLabel(app.chat.planner) };
  if ((await findChatSession(request, app.chat)) !== undefined) return jsonResponse({ resumed: true, planner });
  const { secret } = await app.chat.createSession();
  return jsonResponse({ resumed: false, planner, token: secret });
});
