import { z } from 'zod';
import {
  AppHttpError,
  appRoute,
  checkOrigin,
  jsonResponse,
  maxChatBodyBytes,
  readJsonBody,
  requireChatSession,
} from '@/lib/index';

const AnswerBody = z
  .strictObject({
    elicitationId: z.string().min(1).max(200),
    action: z.enum(['accept', 'decline', 'cancel']),
    content: z.record(z.string().min(1).max(100), z.string().max(2000)).optional(),
  })
  .refine((answer) => answer.action !== 'accept' || answer.content !== undefined, {
    message: 'an accepted form needs its content',
    path: ['content'],
  });

/** POST `{elicitationId, action, content?}`: the human's answer to the form the proxy asked for. */
export const POST = appRoute(async (request, app) => {
  checkOrigin(request, app.origin);
  const sessionId = await requireChatSession(request, app.chat);
  const { elicitationId, action, content } = await readJsonBody(request, AnswerBody, maxChatBodyBytes);
  const result = await app.chat.answerElicitation(sessionId, {
    elicitationId,
    action,
    ...(action === 'accept' && content !== undefined ? { content } : {}),
  });
  if (!result.accepted) throw new AppHttpError(409, result.reason ?? 'the answer was not accepted');
  return jsonResponse({ accepted: true });
});
