import { z } from 'zod';
import {
  AppHttpError,
  appRoute,
  checkOrigin,
  jsonResponse,
  maxChatBodyBytes,
  maxChatMessageLength,
  readJsonBody,
  requireChatSession,
} from '@/lib/index';

const MessageBody = z.strictObject({
  text: z.string().trim().min(1, 'write a message first').max(maxChatMessageLength),
});

/** POST `{text}`: the user's message; the agent's turn runs server-side and streams on the event route. */
export const POST = appRoute(async (request, app) => {
  checkOrigin(request, app.origin);
  const sessionId = await requireChatSession(request, app.chat);
  const { text } = await readJsonBody(request, MessageBody, maxChatBodyBytes);
  const result = await app.chat.send(sessionId, text);
  if (!result.accepted) throw new AppHttpError(409, result.reason ?? 'the message was not accepted');
  return jsonResponse({ accepted: true });
});
