import type { z } from 'zod';
import { readCappedBody } from '../../identity/index';

/** Statuses the app's own route handlers answer refusals with. */
export const appHttpStatuses = [400, 401, 403, 404, 409, 413, 503] as const;

/** A refusal a route handler answers with a 4xx (or 503) and `{error}`: expected, said in words. */
export class AppHttpError extends Error {
  override readonly name = 'AppHttpError';
  constructor(
    readonly status: (typeof appHttpStatuses)[number],
    message: string,
  ) {
    super(message);
  }
}

/** A JSON error body, never cached. */
export function errorResponse(status: number, message: string): Response {
  return Response.json({ error: message }, { status, headers: { 'cache-control': 'no-store' } });
}

/** A JSON answer, never cached. */
export function jsonResponse(body: unknown, init: { readonly headers?: Record<string, string> } = {}): Response {
  return Response.json(body, { headers: { 'cache-control': 'no-store', ...init.headers } });
}

/**
 * The app's one translator from errors to HTTP: an {@link AppHttpError} is its status and message;
 * anything else is a 500 that says nothing of internals (the fault goes to `onUnexpected`).
 */
export async function respond(
  body: () => Promise<Response>,
  onUnexpected: (error: unknown) => void = (error) => console.error('route handler fault', error),
): Promise<Response> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof AppHttpError) return errorResponse(error.status, error.message);
    onUnexpected(error);
    return errorResponse(500, 'internal error');
  }
}

/**
 * A state-changing request must come from the app's own origin (CSRF): browsers always send
 * `Origin` on a POST, so a missing one is refused too.
 */
export function checkOrigin(request: Request, origin: string): void {
  const from = request.headers.get('origin');
  if (from === null) throw new AppHttpError(403, 'missing Origin header');
  if (from !== origin) throw new AppHttpError(403, `requests from ${from} are not accepted`);
}

/**
 * Reads a JSON object body of at most `maxBytes` and checks it against `schema`. Oversized → 413
 * (refused before the whole body is read), not UTF-8 / not a JSON object / wrong shape → 400.
 */
export async function readJsonBody<Schema extends z.ZodType>(
  request: Request,
  schema: Schema,
  maxBytes: number,
): Promise<z.output<Schema>> {
  const text = await readBodyText(request, maxBytes);
  const value = text.trim() === '' ? {} : parseJsonObject(text);
  if (value === undefined) throw new AppHttpError(400, 'the body must be a JSON object');
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues
      .slice(0, 5)
      .map((issue) => `${issue.path.length === 0 ? 'body' : issue.path.join('.')}: ${issue.message}`);
    throw new AppHttpError(400, `invalid request: ${issues.join('; ')}`);
  }
  return parsed.data;
}

/** The body as UTF-8 text, at most `maxBytes`, refusing more as soon as it is seen. */
async function readBodyText(request: Request, maxBytes: number): Promise<string> {
  const body = await readCappedBody(request, maxBytes);
  if (body.ok) return body.text;
  throw new AppHttpError(body.reason === 'too-large' ? 413 : 400, body.message);
}

/** The app's one parser of untrusted JSON text: a plain object, or `undefined` for anything else. */
function parseJsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    // Not JSON: the caller refuses it.
    return undefined;
  }
}
