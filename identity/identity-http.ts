import { createHash, randomBytes } from 'node:crypto';
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import { z } from 'zod';
import { householdProfileChangeSchema } from './household-profile';
import type { IdentityErrorCode } from './identity-error';
import { IdentityError } from './identity-error';
import type { PasskeyRefusal, Passkeys, SignedInSession } from './passkeys';
import { sessionLifetimeMs } from './passkeys';
import { parseJsonObject } from './safe-json';
import { type Role, roles, type SessionRecord } from './store';

/** Largest request body the identity handlers read; WebAuthn responses are a few KiB. */
export const maxIdentityBodyBytes = 64 * 1024;

/** The session cookie of a role: one per role, so both windows are signed in side by side (SPEC §5.3). */
export function sessionCookieName(role: Role): string {
  return `emcp-session-${role}`;
}

/**
 * The approval window's own cookie before anyone is enrolled (issue 26 item 12): a random token
 * that names the window typing enrollment codes, so wrong codes are throttled per window rather
 * than per role. It grants nothing; only its SHA-256 reaches the store.
 */
export const windowCookieName = 'emcp-window';

/** A web-standard route handler: the Next.js routes only mount these. */
export type IdentityHandler = (request: Request) => Promise<Response>;

/** The identity routes of the approval window. */
export interface IdentityHandlers {
  /** POST `{code}` → registration options for the code's role. */
  readonly registrationOptions: IdentityHandler;
  /** POST `{ceremonyId, response}` → enrols the passkey and sets the role's session cookie. */
  readonly registrationVerify: IdentityHandler;
  /** POST (`?as=` narrows the passkeys offered) → sign-in options. */
  readonly signInOptions: IdentityHandler;
  /** POST `{ceremonyId, response}` → sets the session cookie of the passkey's role. */
  readonly signInVerify: IdentityHandler;
  /** GET `?as=role` → who is signed in for that role. */
  readonly session: IdentityHandler;
  /**
   * GET `?as=role` → the requests waiting for that role (needs its session); with `&request=<id>`
   * only that request, when it is waiting for that role (nothing else's data), and whether it is.
   */
  readonly pending: IdentityHandler;
  /** POST `?as=role` `{approvalId}` → approval assertion options over the invoice hash. */
  readonly approvalOptions: IdentityHandler;
  /** POST `?as=role` `{ceremonyId, response}` → verifies the assertion and records the approval. */
  readonly approvalVerify: IdentityHandler;
  /** POST `?as=role` `{requestId}` → assertion options over a gated call's hash. */
  readonly callApprovalOptions: IdentityHandler;
  /** POST `?as=role` `{ceremonyId, response}` → verifies the assertion and records the call approval. */
  readonly callApprovalVerify: IdentityHandler;
  /** POST `?as=role` `{requestId}` → declines the gated call as that role. */
  readonly callDecline: IdentityHandler;
  /** POST `?as=role` `{approvalId}` → declines as that role. */
  readonly decline: IdentityHandler;
  /** GET `?as=parent` → the standing allowances, each with what is left of its period, and the merchants. */
  readonly allowances: IdentityHandler;
  /** POST `?as=parent` the form → the drafted terms and assertion options over their hash. */
  readonly allowanceOptions: IdentityHandler;
  /** POST `?as=parent` `{ceremonyId, response}` → the household signs and stores the `Allowance`. */
  readonly allowanceVerify: IdentityHandler;
  /** POST `?as=parent` `{allowanceId}` → revokes it, with immediate effect. */
  readonly allowanceRevoke: IdentityHandler;
  /** GET `?as=role` → the household's names for its members and its time zone (either member's session). */
  readonly household: IdentityHandler;
  /** POST `?as=parent` `{names?, timeZone?}` → changes them (the parent's session only); a refusal changes nothing. */
  readonly householdUpdate: IdentityHandler;
  /** POST `?as=role` → ends that role's session and clears its cookie. */
  readonly signOut: IdentityHandler;
}

/** What {@link createIdentityHandlers} needs. */
export interface CreateIdentityHandlersOptions {
  readonly passkeys: Passkeys;
  /** The one origin a state-changing request may come from, e.g. `http://localhost:3000`. */
  readonly origin: string;
  /** Force `Secure` cookies; default: when `origin` is https. */
  readonly secureCookies?: boolean;
  /** Told about unexpected faults, which the client sees only as a 500. */
  readonly onUnexpectedError?: (error: unknown) => void;
}

// Request bodies, validated at this boundary. Unknown keys are dropped: a `role` in a body is never read.
const base64url = z
  .string()
  .min(1)
  .max(16_384)
  .regex(/^[A-Za-z0-9_-]+$/, 'must be base64url');
const roleSchema = z.enum(roles);
const codeBody = z.object({ code: z.string().min(1).max(100) });
const approvalBody = z.object({ approvalId: z.string().min(1).max(200) });
const requestIdSchema = z.string().min(1).max(200);
const callBody = z.object({ requestId: requestIdSchema });
const attachment = z.enum(['platform', 'cross-platform']).nullish();
const registrationResponse = z
  .object({
    id: base64url,
    rawId: base64url,
    type: z.literal('public-key'),
    authenticatorAttachment: attachment,
    response: z.object({
      clientDataJSON: base64url,
      attestationObject: base64url,
      transports: z.array(z.string().max(32)).max(10).nullish(),
    }),
  })
  // Rebuilt field by field: what reaches the verifier is exactly what was checked. Extension
  // outputs are not used and are dropped.
  .transform(
    (value): RegistrationResponseJSON => ({
      id: value.id,
      rawId: value.rawId,
      type: value.type,
      clientExtensionResults: {},
      ...(value.authenticatorAttachment ? { authenticatorAttachment: value.authenticatorAttachment } : {}),
      response: {
        clientDataJSON: value.response.clientDataJSON,
        attestationObject: value.response.attestationObject,
        ...(value.response.transports ? { transports: value.response.transports } : {}),
      },
    }),
  );
const authenticationResponse = z
  .object({
    id: base64url,
    rawId: base64url,
    type: z.literal('public-key'),
    authenticatorAttachment: attachment,
    response: z.object({
      clientDataJSON: base64url,
      authenticatorData: base64url,
      signature: base64url,
      userHandle: base64url.nullish(),
    }),
  })
  .transform(
    (value): AuthenticationResponseJSON => ({
      id: value.id,
      rawId: value.rawId,
      type: value.type,
      clientExtensionResults: {},
      ...(value.authenticatorAttachment ? { authenticatorAttachment: value.authenticatorAttachment } : {}),
      response: {
        clientDataJSON: value.response.clientDataJSON,
        authenticatorData: value.response.authenticatorData,
        signature: value.response.signature,
        ...(value.response.userHandle ? { userHandle: value.response.userHandle } : {}),
      },
    }),
  );
const ceremonyId = z.string().min(1).max(100);
// The parent's allowance form; the terms' own schema checks the rest (cap ≤ budget, within a year).
const allowanceFormBody = z
  .object({
    merchantDid: z.string().min(1).max(200),
    perOrderCapCents: z.number().int().min(1),
    budgetCents: z.number().int().min(1),
    period: z.enum(['day', 'week']),
    timeZone: z.string().min(1).max(64),
    expiresAt: z.number().int().min(0),
  })
  .strict();
const allowanceIdBody = z.object({ allowanceId: z.string().min(1).max(200) });
const registrationVerifyBody = z.object({ ceremonyId, response: registrationResponse });
const assertionVerifyBody = z.object({ ceremonyId, response: authenticationResponse });

const statusOf: Record<IdentityErrorCode, number> = {
  'bad-request': 400,
  unauthenticated: 401,
  forbidden: 403,
  'not-found': 404,
  conflict: 409,
  'rate-limited': 429,
  'household-invalid': 500,
  'key-file': 500,
  'decrypt-failed': 500,
  'issue-failed': 500,
  'store-failed': 500,
  'merchant-conflict': 500,
};

/**
 * The approval window's identity routes as web-standard handlers (SPEC §5.3): every POST must come
 * from the configured origin; bodies are size-capped and zod-checked; sessions are one HttpOnly,
 * SameSite=Strict cookie per role, and `?as=` only picks which cookie a request reads. Refusals are
 * `{error}` with a 4xx; faults are a 500 that says nothing of internals.
 */
export function createIdentityHandlers(options: CreateIdentityHandlersOptions): IdentityHandlers {
  const { passkeys, origin } = options;
  const secure = options.secureCookies ?? origin.startsWith('https:');

  const cookie = (role: Role, value: string, maxAgeSeconds: number) =>
    `${sessionCookieName(role)}=${value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAgeSeconds}${secure ? '; Secure' : ''}`;

  /** Runs a handler, translating errors into HTTP in this one place. */
  const handle = (name: string, body: (request: Request) => Promise<Response>): IdentityHandler => {
    const handler = async (request: Request) => {
      try {
        return await body(request);
      } catch (error) {
        if (error instanceof BodyTooLarge) return fail(413, error.message);
        if (error instanceof IdentityError && statusOf[error.code] < 500)
          return fail(statusOf[error.code], error.message);
        options.onUnexpectedError?.(error);
        return fail(500, 'internal error');
      }
    };
    Object.defineProperty(handler, 'name', { value: name });
    return handler;
  };

  /** A POST's checks before anything is read or changed: its Origin, then its JSON body. */
  const readPost = async <Schema extends z.ZodType>(request: Request, schema: Schema): Promise<z.output<Schema>> => {
    if (request.method !== 'POST') throw new IdentityError('bad-request', 'use POST');
    const from = request.headers.get('origin');
    if (from !== origin) {
      throw new IdentityError(
        'forbidden',
        from === null ? 'missing Origin header' : `requests from ${from} are not accepted`,
      );
    }
    const text = await readBody(request);
    const value = text.trim() === '' ? {} : parseJsonObject(text);
    if (value === undefined) throw new IdentityError('bad-request', 'the body must be a JSON object');
    const parsed = schema.safeParse(value);
    if (!parsed.success) throw new IdentityError('bad-request', `invalid request: ${describe(parsed.error)}`);
    return parsed.data;
  };

  /** The live session for the role `?as=` names, from that role's cookie only. */
  const sessionOf = async (request: Request, role: Role): Promise<SessionRecord | undefined> => {
    const token = readCookie(request, sessionCookieName(role));
    if (token === undefined) return undefined;
    const session = await passkeys.findSession(token);
    // A cookie only ever speaks for its own role.
    return session?.role === role ? session : undefined;
  };
  const requireSession = async (request: Request, role: Role) => {
    const session = await sessionOf(request, role);
    if (session === undefined) throw new IdentityError('unauthenticated', `not signed in as ${role}`);
    return session;
  };

  /** Answers a verified ceremony with the role's cookie, ending the session that cookie held before. */
  const signedIn = async (request: Request, session: SignedInSession) => {
    const previous = readCookie(request, sessionCookieName(session.role));
    if (previous !== undefined) await passkeys.signOut(previous);
    return Response.json(
      {
        role: session.role,
        memberDid: session.memberDid,
        credentialId: session.credentialId,
        expiresAt: session.expiresAt,
      },
      {
        headers: {
          'cache-control': 'no-store',
          'set-cookie': cookie(session.role, session.token, Math.floor(sessionLifetimeMs / 1000)),
        },
      },
    );
  };

  return {
    registrationOptions: handle('registrationOptions', async (request) => {
      const { code } = await readPost(request, codeBody);
      // The window typing the code is the source its wrong codes are charged to; a window without
      // the cookie (or one that drops it) is a new source, which only the per-role ceiling bounds.
      const held = readCookie(request, windowCookieName);
      const token =
        held !== undefined && /^[A-Za-z0-9_-]{43}$/.test(held) ? held : randomBytes(32).toString('base64url');
      const source = createHash('sha256').update(token, 'utf8').digest('base64url');
      const result = await passkeys.registration.options({ code, source });
      const response = result.ok ? ok({ ceremonyId: result.ceremonyId, options: result.options }) : refused(result);
      if (token !== held) {
        response.headers.append(
          'set-cookie',
          `${windowCookieName}=${token}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${Math.floor(sessionLifetimeMs / 1000)}${secure ? '; Secure' : ''}`,
        );
      }
      return response;
    }),

    registrationVerify: handle('registrationVerify', async (request) => {
      const body = await readPost(request, registrationVerifyBody);
      const result = await passkeys.registration.verify(body);
      return result.verified ? signedIn(request, result.session) : refused(result);
    }),

    signInOptions: handle('signInOptions', async (request) => {
      await readPost(request, z.object({}));
      const hint = optionalRole(request);
      const result = await passkeys.signIn.options(hint === undefined ? {} : { role: hint });
      if (!result.ok) return refused(result);
      return ok({ ceremonyId: result.ceremonyId, options: result.options });
    }),

    signInVerify: handle('signInVerify', async (request) => {
      const body = await readPost(request, assertionVerifyBody);
      const result = await passkeys.signIn.verify(body);
      return result.verified ? signedIn(request, result.session) : refused(result);
    }),

    session: handle('session', async (request) => {
      const role = requiredRole(request);
      const session = await sessionOf(request, role);
      if (session === undefined) return ok({ signedIn: false, role });
      return ok({
        signedIn: true,
        role,
        memberDid: session.memberDid,
        credentialId: session.credentialId,
        expiresAt: session.expiresAt,
      });
    }),

    pending: handle('pending', async (request) => {
      const only = requestedId(request);
      const session = await requireSession(request, requiredRole(request));
      const approvals = await passkeys.pendingFor(session);
      const calls = await passkeys.call.pendingFor(session);
      if (only === undefined) return ok({ role: session.role, approvals, calls });
      // A window opened for one request (a URL ask) gets that request or nothing: an unknown id,
      // another role's request or a decided one never shows another request's data.
      const approval = approvals.filter((view) => view.approvalId === only);
      const call = calls.filter((view) => view.requestId === only);
      return ok({
        role: session.role,
        approvals: approval,
        calls: call,
        request: { id: only, waiting: approval.length + call.length > 0 },
      });
    }),

    approvalOptions: handle('approvalOptions', async (request) => {
      const { approvalId } = await readPost(request, approvalBody);
      const session = await requireSession(request, requiredRole(request));
      const result = await passkeys.approval.options({ session, approvalId });
      if (!result.ok) return refused(result);
      return ok({ ceremonyId: result.ceremonyId, options: result.options });
    }),

    approvalVerify: handle('approvalVerify', async (request) => {
      const body = await readPost(request, assertionVerifyBody);
      const session = await requireSession(request, requiredRole(request));
      const result = await passkeys.approval.verify({ session, ...body });
      if (!result.verified) return refused(result);
      return ok({ approvalId: result.record.approvalId, status: result.record.status, role: session.role });
    }),

    callApprovalOptions: handle('callApprovalOptions', async (request) => {
      const { requestId } = await readPost(request, callBody);
      const session = await requireSession(request, requiredRole(request));
      const result = await passkeys.call.options({ session, requestId });
      if (!result.ok) return refused(result);
      return ok({ ceremonyId: result.ceremonyId, options: result.options });
    }),

    callApprovalVerify: handle('callApprovalVerify', async (request) => {
      const body = await readPost(request, assertionVerifyBody);
      const session = await requireSession(request, requiredRole(request));
      const result = await passkeys.call.verify({ session, ...body });
      if (!result.verified) return refused(result);
      return ok({ requestId: result.view.requestId, status: result.view.status, role: session.role });
    }),

    callDecline: handle('callDecline', async (request) => {
      const { requestId } = await readPost(request, callBody);
      const session = await requireSession(request, requiredRole(request));
      const result = await passkeys.call.decline({ session, requestId });
      if (!result.ok) return fail(409, result.reason);
      return ok({ requestId: result.record.requestId, status: result.record.status, role: session.role });
    }),

    decline: handle('decline', async (request) => {
      const { approvalId } = await readPost(request, approvalBody);
      const session = await requireSession(request, requiredRole(request));
      const result = await passkeys.decline({ session, approvalId });
      if (!result.ok) return fail(409, result.reason);
      return ok({ approvalId: result.record.approvalId, status: result.record.status, role: session.role });
    }),

    allowances: handle('allowances', async (request) => {
      const session = await requireSession(request, requiredRole(request));
      const result = await passkeys.allowance.list(session);
      if (!result.ok) return refused(result);
      return ok({ allowances: result.allowances, merchants: result.merchants });
    }),

    allowanceOptions: handle('allowanceOptions', async (request) => {
      const form = await readPost(request, allowanceFormBody);
      const session = await requireSession(request, requiredRole(request));
      const result = await passkeys.allowance.options({ session, form });
      if (!result.ok) return refused(result);
      return ok({ ceremonyId: result.ceremonyId, options: result.options, terms: result.terms });
    }),

    allowanceVerify: handle('allowanceVerify', async (request) => {
      const body = await readPost(request, assertionVerifyBody);
      const session = await requireSession(request, requiredRole(request));
      const result = await passkeys.allowance.verify({ session, ...body });
      if (!result.verified) return refused(result);
      return ok({ allowanceId: result.record.allowanceId, terms: result.terms });
    }),

    allowanceRevoke: handle('allowanceRevoke', async (request) => {
      const { allowanceId } = await readPost(request, allowanceIdBody);
      const session = await requireSession(request, requiredRole(request));
      const result = await passkeys.allowance.revoke({ session, allowanceId });
      if (!result.ok) return refused(result);
      return ok({
        allowanceId,
        ...(result.record.revokedAt === undefined
          ? {}
          : { revokedAt: new Date(result.record.revokedAt).toISOString() }),
      });
    }),

    household: handle('household', async (request) => {
      const session = await requireSession(request, requiredRole(request));
      const result = await passkeys.profile.read(session);
      return result.ok ? ok(result.profile) : refused(result);
    }),

    householdUpdate: handle('householdUpdate', async (request) => {
      const change = await readPost(request, householdProfileChangeSchema);
      const session = await requireSession(request, requiredRole(request));
      const result = await passkeys.profile.update({ session, change });
      return result.ok ? ok(result.profile) : refused(result);
    }),

    signOut: handle('signOut', async (request) => {
      await readPost(request, z.object({}));
      const role = requiredRole(request);
      const token = readCookie(request, sessionCookieName(role));
      if (token !== undefined) await passkeys.signOut(token);
      return Response.json(
        { signedIn: false, role },
        { headers: { 'cache-control': 'no-store', 'set-cookie': cookie(role, '', 0) } },
      );
    }),
  };
}

/** A body over the cap: a bad request that HTTP answers with 413 rather than 400. */
class BodyTooLarge extends IdentityError {
  constructor(message: string) {
    super('bad-request', message);
  }
}

function ok(body: unknown): Response {
  return Response.json(body, { headers: { 'cache-control': 'no-store' } });
}

function fail(status: number, message: string): Response {
  return Response.json({ error: message }, { status, headers: { 'cache-control': 'no-store' } });
}

function refused(refusal: PasskeyRefusal): Response {
  return fail(statusOf[refusal.code] < 500 ? statusOf[refusal.code] : 400, refusal.reason);
}

/** `?as=child|parent`, required. */
/** The one request a window was opened for (`&request=<id>`), if any. */
function requestedId(request: Request): string | undefined {
  const value = new URL(request.url).searchParams.get('request');
  if (value === null) return undefined;
  const parsed = requestIdSchema.safeParse(value);
  if (!parsed.success) throw new IdentityError('bad-request', '&request= must be a request id (1 to 200 characters)');
  return parsed.data;
}

function requiredRole(request: Request): Role {
  const role = optionalRole(request);
  if (role === undefined) throw new IdentityError('bad-request', 'say which window: ?as=child or ?as=parent');
  return role;
}

function optionalRole(request: Request): Role | undefined {
  const value = new URL(request.url).searchParams.get('as');
  if (value === null) return undefined;
  const parsed = roleSchema.safeParse(value);
  if (!parsed.success) throw new IdentityError('bad-request', '?as= must be child or parent');
  return parsed.data;
}

/** Reads at most {@link maxIdentityBodyBytes} of the body, refusing more before it is all read. */
async function readBody(request: Request): Promise<string> {
  const body = await readCappedBody(request, maxIdentityBodyBytes);
  if (body.ok) return body.text;
  if (body.reason === 'too-large') throw new BodyTooLarge(body.message);
  throw new IdentityError('bad-request', body.message);
}

/** What {@link readCappedBody} read: the text, or why not. */
export type CappedBody =
  | { readonly ok: true; readonly text: string }
  | { readonly ok: false; readonly reason: 'too-large' | 'not-utf8'; readonly message: string };

/**
 * A request body as UTF-8 text, at most `maxBytes`, refusing more as soon as it is seen (a
 * declared Content-Length first, then while streaming) so an oversized body is never buffered.
 */
export async function readCappedBody(request: Request, maxBytes: number): Promise<CappedBody> {
  const tooLarge = { ok: false, reason: 'too-large', message: `request body larger than ${maxBytes} bytes` } as const;
  if (Number(request.headers.get('content-length') ?? 0) > maxBytes) return tooLarge;
  if (request.body === null) return { ok: true, text: '' };
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      return tooLarge;
    }
    chunks.push(value);
  }
  try {
    return { ok: true, text: new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks)) };
  } catch {
    return { ok: false, reason: 'not-utf8', message: 'the body is not UTF-8' };
  }
}

function readCookie(request: Request, name: string): string | undefined {
  for (const part of (request.headers.get('cookie') ?? '').split(';')) {
    const separator = part.indexOf('=');
    if (separator > 0 && part.slice(0, separator).trim() === name) {
      const value = part.slice(separator + 1).trim();
      return value === '' ? undefined : value;
    }
  }
  return undefined;
}

function describe(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length === 0 ? 'body' : issue.path.join('.')}: ${issue.message}`)
    .join('; ');
}
