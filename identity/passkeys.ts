import { createHash, createPublicKey, randomBytes } from 'node:crypto';
import {
  type AuthenticationResponseJSON,
  generateAuthenticationOptions,
  generateRegistrationOptions,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from '@simplewebauthn/server';
import { cose, decodeAttestationObject, decodeCredentialPublicKey } from '@simplewebauthn/server/helpers';
import type { AllowanceRecord } from './allowance-store';
import { type AllowanceTerms, allowanceHashOf, canonicalTerms, parseCanonicalTerms } from './allowance-terms';
import type { AllowanceDraft, Allowances, AllowanceView } from './allowances';
import type { Approvals, ApprovalView, DecisionOutcome } from './approvals';
import type { CallApprovals, CallApprovalView, CallDecisionOutcome } from './call-approvals';
import { checkEnrollmentCode } from './enrollment-codes';
import type { IdentityEventSink } from './events';
import { framingRefusal } from './framing-refusal';
import type { Household } from './household';
import { createHouseholdProfile, type HouseholdProfileChange, type HouseholdProfileView } from './household-profile';
import type { IdentityErrorCode } from './identity-error';
import { decodeSegment } from './safe-json';
import type { ApprovalRecord, CeremonyRecord, PasskeyRecord, Role, SessionRecord } from './store';

/** How long a WebAuthn ceremony may take between its options and its response. */
export const ceremonyLifetimeMs = 5 * 60 * 1000;

/** How long an approval-window session lasts after sign-in: a day's use, not a week's. */
export const sessionLifetimeMs = 12 * 60 * 60 * 1000;

/** The only public-key algorithm accepted: ES256 (P-256), the key the `PasskeyEnrollment` VC carries as a JWK. */
const es256 = -7;

/** A refusal: why, in words fit for the person at the window, and a closed code the HTTP layer maps to a status. */
export interface PasskeyRefusal {
  readonly reason: string;
  readonly code: IdentityErrorCode;
}

/** Options handed to the browser, or why none were. */
export type CeremonyOptions<Options> =
  | { readonly ok: true; readonly ceremonyId: string; readonly options: Options }
  | ({ readonly ok: false } & PasskeyRefusal);

/** A signed-in approval-window session. `token` goes into an HttpOnly cookie; the store keeps only its hash. */
export interface SignedInSession {
  readonly token: string;
  readonly role: Role;
  readonly memberDid: string;
  readonly credentialId: string;
  readonly expiresAt: number;
}

/** A verified registration or sign-in: the member is signed in. */
export type SignInResult =
  | { readonly verified: true; readonly session: SignedInSession }
  | ({ readonly verified: false } & PasskeyRefusal);

/** A verified approval assertion, with the request as the approvals module left it. */
export type ApprovalResult =
  | { readonly verified: true; readonly record: ApprovalRecord }
  | ({ readonly verified: false } & PasskeyRefusal);

/** What passkeys needs of the approvals module: `approve` issues the member's `OrderApproval` over the verified assertion. */
export type PasskeyApprovals = Pick<Approvals, 'approve' | 'decline' | 'pendingFor'>;

/** What passkeys needs of call approvals: `approve` issues the member's `CallApproval` over the verified assertion. */
export type PasskeyCallApprovals = Pick<CallApprovals, 'get' | 'approve' | 'decline' | 'pendingFor'>;

/** A verified call-approval assertion, with where the request stands now. */
export type CallApprovalResult =
  | { readonly verified: true; readonly view: CallApprovalView }
  | ({ readonly verified: false } & PasskeyRefusal);

/** What passkeys needs of standing allowances: the household drafts, issues, lists and revokes them. */
export type PasskeyAllowances = Pick<Allowances, 'draft' | 'issue' | 'list' | 'revoke'>;

/** What the parent's allowance form sends: the merchant by its id (its name is the household's), the caps, the period. */
export type AllowanceForm = Omit<AllowanceDraft, 'merchantName' | 'notBefore'>;

/** A signed allowance, as the parent's window is told it. */
export type AllowanceResult =
  | { readonly verified: true; readonly record: AllowanceRecord; readonly terms: AllowanceTerms }
  | ({ readonly verified: false } & PasskeyRefusal);

/** The parent's allowances and the merchants one can be set at. */
export type AllowanceList =
  | {
      readonly ok: true;
      readonly allowances: readonly AllowanceView[];
      readonly merchants: readonly { readonly did: string; readonly name: string }[];
    }
  | ({ readonly ok: false } & PasskeyRefusal);

/** The household's profile as a window is told it, or why not. */
export type ProfileResult =
  | { readonly ok: true; readonly profile: HouseholdProfileView }
  | ({ readonly ok: false } & PasskeyRefusal);

/** What {@link createPasskeys} needs. */
export interface CreatePasskeysOptions {
  readonly household: Household;
  readonly approvals: PasskeyApprovals;
  /** Gated non-payment calls (`approval_required`); without it the window has none to show. */
  readonly callApprovals?: PasskeyCallApprovals;
  /** Standing allowances the parent signs in the window; without it the window offers none. */
  readonly allowances?: PasskeyAllowances;
  /** WebAuthn relying-party id: `localhost` by default (SPEC §5.3), the host name for a real host. */
  readonly rpId: string;
  /** The exact origin the approval window is served from, e.g. `http://localhost:3000`. */
  readonly origin: string;
  readonly rpName?: string;
  readonly events?: IdentityEventSink;
  readonly clock?: () => Date;
}

/** The passkey ceremonies of SPEC §5.3, as plain data in and out. */
export interface Passkeys {
  readonly registration: {
    /** Checks the enrollment code and starts a registration for the code's role. */
    /** `source`: the approval-window session the code was typed in, charged for a wrong code. */
    options(request: {
      readonly code: string;
      readonly source?: string;
    }): Promise<CeremonyOptions<PublicKeyCredentialCreationOptionsJSON>>;
    /** Verifies the registration, uses the code, enrols the passkey and signs the member in. */
    verify(request: {
      readonly ceremonyId: string;
      readonly response: RegistrationResponseJSON;
    }): Promise<SignInResult>;
  };
  readonly signIn: {
    /** Starts a sign-in; `role` only narrows which passkeys the browser offers. */
    options(request: { readonly role?: Role }): Promise<CeremonyOptions<PublicKeyCredentialRequestOptionsJSON>>;
    /** Verifies the assertion; the session's role is the passkey's enrolled role. */
    verify(request: {
      readonly ceremonyId: string;
      readonly response: AuthenticationResponseJSON;
    }): Promise<SignInResult>;
  };
  readonly approval: {
    /** Starts an approval assertion whose challenge is the 32 bytes of the request's `invoiceHash`. */
    options(request: {
      readonly session: SessionRecord;
      readonly approvalId: string;
    }): Promise<CeremonyOptions<PublicKeyCredentialRequestOptionsJSON>>;
    /** Verifies the assertion and hands it to the approvals module, which issues the `OrderApproval`. */
    verify(request: {
      readonly session: SessionRecord;
      readonly ceremonyId: string;
      readonly response: AuthenticationResponseJSON;
    }): Promise<ApprovalResult>;
  };
  readonly call: {
    /** Starts an assertion whose challenge is the 32 bytes of the gated call's hash. */
    options(request: {
      readonly session: SessionRecord;
      readonly requestId: string;
    }): Promise<CeremonyOptions<PublicKeyCredentialRequestOptionsJSON>>;
    /** Verifies the assertion and hands it to call approvals, which issue the `CallApproval`. */
    verify(request: {
      readonly session: SessionRecord;
      readonly ceremonyId: string;
      readonly response: AuthenticationResponseJSON;
    }): Promise<CallApprovalResult>;
    /** Declines a gated call as the session's role. */
    decline(request: { readonly session: SessionRecord; readonly requestId: string }): Promise<CallDecisionOutcome>;
    /** The gated calls waiting for the session's role. */
    pendingFor(session: SessionRecord): Promise<readonly CallApprovalView[]>;
  };
  /** Standing allowances, for the parent's session only (docs/human-authority.md "Standing allowances"). */
  readonly allowance: {
    /** Drafts the terms from the form and starts an assertion whose challenge is the 32 bytes of their hash. */
    options(request: { readonly session: SessionRecord; readonly form: AllowanceForm }): Promise<
      | {
          readonly ok: true;
          readonly ceremonyId: string;
          readonly options: PublicKeyCredentialRequestOptionsJSON;
          readonly terms: AllowanceTerms;
        }
      | ({ readonly ok: false } & PasskeyRefusal)
    >;
    /** Verifies the parent's assertion over those terms' hash and has the household sign and store the `Allowance`. */
    verify(request: {
      readonly session: SessionRecord;
      readonly ceremonyId: string;
      readonly response: AuthenticationResponseJSON;
    }): Promise<AllowanceResult>;
    list(session: SessionRecord): Promise<AllowanceList>;
    /** Revokes at once: the store orders it against every hold. */
    revoke(request: {
      readonly session: SessionRecord;
      readonly allowanceId: string;
    }): Promise<{ readonly ok: true; readonly record: AllowanceRecord } | ({ readonly ok: false } & PasskeyRefusal)>;
  };
  /**
   * The household's names for its members and its time zone (docs/human-authority.md "Member names
   * and the household's time zone"): read by either member's session, changed by the parent's only.
   */
  readonly profile: {
    read(session: SessionRecord): Promise<ProfileResult>;
    update(request: {
      readonly session: SessionRecord;
      readonly change: HouseholdProfileChange;
    }): Promise<ProfileResult>;
  };
  /** Declines a request as the session's role. */
  decline(request: { readonly session: SessionRecord; readonly approvalId: string }): Promise<DecisionOutcome>;
  /** The requests waiting for the session's role. */
  pendingFor(session: SessionRecord): Promise<readonly ApprovalView[]>;
  /** The live session for a cookie's token, or `undefined` (unknown, malformed or expired). */
  findSession(token: string): Promise<SessionRecord | undefined>;
  /** Ends the session for a cookie's token. */
  signOut(token: string): Promise<void>;
}

/** Marks an approval ceremony as one for a gated call (its request id follows). */
const callCeremonyPrefix = 'call:';
/** Marks an approval ceremony as one for an allowance (the terms' canonical bytes follow). */
const allowanceCeremonyPrefix = 'allowance:';

/** SHA-256 hex of a session token: the only form a token is stored in. */
export function hashSessionToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * Creates the passkey ceremonies (SPEC §5.3) over `@simplewebauthn/server`: registration behind a
 * one-time enrollment code, sign-in to a per-role session, and the approval assertion over an
 * invoice hash. Every expected failure is a value with a reason, reported as an event that carries
 * no code, token or challenge.
 */
export function createPasskeys(options: CreatePasskeysOptions): Passkeys {
  const { household, approvals, rpId, origin, callApprovals, allowances } = options;
  const store = household.store;
  const rpName = options.rpName ?? 'extensible-mcp household';
  const clock = options.clock ?? (() => new Date());
  const emit: IdentityEventSink = options.events ?? (() => undefined);
  const profile = createHouseholdProfile({ store: store.profile, clock });

  // A refusal carries both discriminants (`ok` and `verified`: false) so one value fits an options
  // result and a verification result alike; it is emitted as an event without any secret.
  const refuseEnrollment = (reason: string, code: IdentityErrorCode, role?: Role) => {
    emit(role === undefined ? { kind: 'enrollment-refused', reason } : { kind: 'enrollment-refused', role, reason });
    return { ok: false as const, verified: false as const, reason, code };
  };
  const refusePasskey = (ceremony: 'sign-in' | 'approval', reason: string, code: IdentityErrorCode) => {
    emit({ kind: 'passkey-refused', ceremony, reason });
    return { ok: false as const, verified: false as const, reason, code };
  };

  /** Opens a session for a verified passkey; its role is the passkey's enrolled role, never the request's. */
  const signIn = async (passkey: Pick<PasskeyRecord, 'role' | 'memberDid' | 'credentialId'>, now: number) => {
    const token = randomBytes(32).toString('base64url');
    const expiresAt = now + sessionLifetimeMs;
    await store.sessions.create({
      tokenHash: hashSessionToken(token),
      role: passkey.role,
      memberDid: passkey.memberDid,
      credentialId: passkey.credentialId,
      createdAt: now,
      expiresAt,
    });
    return { token, role: passkey.role, memberDid: passkey.memberDid, credentialId: passkey.credentialId, expiresAt };
  };

  /** The stored, unexpired session behind a session record: its role is read from the store, not the caller. */
  const liveSession = async (session: SessionRecord, now: number) => {
    const current = await store.sessions.get(session.tokenHash);
    return current !== undefined && current.expiresAt > now ? current : undefined;
  };

  /**
   * The checks an assertion (sign-in or approval) must pass, in the order of WebAuthn L3 §7.2
   * "Verifying an Authentication Assertion", then the sign counter moved atomically.
   */
  const verifyAssertion = async (request: {
    readonly ceremony: 'sign-in' | 'approval';
    readonly response: AuthenticationResponseJSON;
    readonly expectedChallenge: string;
    readonly allowed: readonly PasskeyRecord[] | undefined;
    readonly now: number;
  }): Promise<{ verified: true; passkey: PasskeyRecord } | ({ verified: false } & PasskeyRefusal)> => {
    const { response, ceremony } = request;
    const refuse = (reason: string, code: IdentityErrorCode = 'unauthenticated') =>
      refusePasskey(ceremony, reason, code);
    // §7.2 step 7: identify the credential; one this household never enrolled proves nothing.
    const passkey = typeof response.id === 'string' ? await store.passkeys.get(response.id) : undefined;
    if (passkey === undefined) return refuse('unknown credential: this passkey is not enrolled here');
    // §7.2 step 5: the credential must be one of the allowCredentials this ceremony offered.
    if (
      request.allowed !== undefined &&
      !request.allowed.some((allowed) => allowed.credentialId === passkey.credentialId)
    ) {
      return refuse(`this passkey (${passkey.role}) is not allowed for this ${ceremony}`, 'forbidden');
    }
    // §7.2 step 6: a userHandle, when the authenticator returns one, must be the one enrolled with the credential.
    const userHandle = response.response?.userHandle;
    if (userHandle !== undefined && userHandle !== null && userHandle !== passkey.userHandle) {
      return refuse("userHandle does not match the passkey's member");
    }
    // §7.2 step 14, checked before SimpleWebAuthn: it lets `crossOrigin: true` (and any string)
    // through when no `topOrigin` is sent. The approval window is never embedded, so any cross-origin use is refused.
    const framing = checkFraming(response.response?.clientDataJSON);
    if (framing !== undefined) return refuse(framing, 'bad-request');
    // §7.2 steps 11-13 and 15-21 (type, challenge, origin, rpIdHash, UP, UV, signature) and the
    // step 22 counter comparison, by SimpleWebAuthn with UV required.
    let newCounter: number;
    try {
      const result = await verifyAuthenticationResponse({
        response,
        expectedChallenge: request.expectedChallenge,
        expectedOrigin: origin,
        expectedRPID: rpId,
        expectedType: 'webauthn.get',
        credential: {
          id: passkey.credentialId,
          publicKey: new Uint8Array(Buffer.from(passkey.publicKeyCose, 'base64url')),
          counter: passkey.counter,
          transports: [...passkey.transports],
        },
        requireUserVerification: true,
      });
      if (!result.verified) return refuse('the passkey signature does not verify');
      if (!result.authenticationInfo.userVerified) return refuse('user verification (UV) flag missing');
      newCounter = result.authenticationInfo.newCounter;
    } catch (error) {
      return refuse(reasonFrom(error, 'webauthn.get'));
    }
    // §7.2 step 22: the sign counter must move forward unless the authenticator never counts (both 0).
    if ((passkey.counter > 0 || newCounter > 0) && newCounter <= passkey.counter) {
      return refuse(counterWentBackwards);
    }
    // The counter moves by compare-and-set: of two assertions racing from a cloned key, one loses.
    if (!(await store.passkeys.updateCounter(passkey.credentialId, passkey.counter, newCounter))) {
      return refuse(`${counterWentBackwards} (it moved during this ceremony)`);
    }
    return { verified: true, passkey };
  };

  return {
    registration: {
      async options({ code, source }) {
        const now = clock();
        // The role is the stored code's role; the request carries no role that could matter.
        const check = await checkEnrollmentCode({ store, code, now, ...(source === undefined ? {} : { source }) });
        if (!check.ok)
          return refuseEnrollment(check.reason, check.rateLimited ? 'rate-limited' : 'forbidden', check.role);
        const userHandle = new Uint8Array(randomBytes(32));
        const enrolled = await store.passkeys.listByRole(check.role);
        const creation = await generateRegistrationOptions({
          rpName,
          rpID: rpId,
          userName: check.role,
          userDisplayName: `Household ${check.role}`,
          userID: userHandle,
          timeout: ceremonyLifetimeMs,
          attestationType: 'none',
          excludeCredentials: enrolled.map((passkey) => ({
            id: passkey.credentialId,
            transports: [...passkey.transports],
          })),
          authenticatorSelection: { residentKey: 'preferred', userVerification: 'required' },
          supportedAlgorithmIDs: [es256],
        });
        const ceremonyId = randomBytes(16).toString('base64url');
        await store.ceremonies.put(
          {
            id: ceremonyId,
            kind: 'registration',
            challenge: creation.challenge,
            role: check.role,
            codeHash: check.codeHash,
            userHandle: creation.user.id,
            expiresAt: now.getTime() + ceremonyLifetimeMs,
          },
          now.getTime(),
        );
        return { ok: true, ceremonyId, options: creation };
      },

      async verify({ ceremonyId, response }) {
        const now = clock();
        // The ceremony is taken (read and deleted) first: its challenge verifies at most once.
        const ceremony = await takeCeremony(ceremonyId, 'registration');
        if (ceremony?.role === undefined || ceremony.codeHash === undefined || ceremony.userHandle === undefined) {
          return refuseEnrollment('unknown or already used registration ceremony; start again', 'bad-request');
        }
        const role = ceremony.role;
        const refuse = (reason: string, code: IdentityErrorCode = 'forbidden') => refuseEnrollment(reason, code, role);
        if (ceremony.expiresAt <= now.getTime()) return refuse('the registration took too long; start again');
        // WebAuthn L3 §7.1 "Registering a New Credential", in order. Steps 5-6: the clientData and
        // its framing. SimpleWebAuthn does not look at crossOrigin/topOrigin when registering.
        const framing = checkFraming(response.response?.clientDataJSON);
        if (framing !== undefined) return refuse(framing, 'bad-request');
        // §7.1 step 21 (attestation format), checked before any attestation statement is parsed:
        // only `none` is accepted, so no certificate chain from the request is ever processed.
        const format = attestationFormat(response.response?.attestationObject);
        if (format !== 'none') {
          return refuse(
            format === undefined
              ? 'attestationObject is not valid CBOR'
              : `attestation format "${format}" refused: only "none" is accepted`,
            'bad-request',
          );
        }
        // §7.1 steps 7-9 (type, challenge, origin), 13 (rpIdHash), 14-15 (UP, UV), 16-17 (algorithm
        // is ES256), 19-21 (attestation `none` has an empty statement), by SimpleWebAuthn.
        let credential: { id: string; publicKey: Uint8Array; counter: number; transports: readonly string[] };
        try {
          const result = await verifyRegistrationResponse({
            response,
            expectedChallenge: ceremony.challenge,
            expectedOrigin: origin,
            expectedRPID: rpId,
            expectedType: 'webauthn.create',
            requireUserPresence: true,
            requireUserVerification: true,
            supportedAlgorithmIDs: [es256],
          });
          if (!result.verified) return refuse('the registration could not be verified');
          const info = result.registrationInfo;
          if (info.fmt !== 'none') return refuse(`attestation format "${info.fmt}" refused: only "none" is accepted`);
          if (!info.userVerified) return refuse('user verification (UV) flag missing');
          credential = {
            id: info.credential.id,
            publicKey: info.credential.publicKey,
            counter: info.credential.counter,
            transports: info.credential.transports ?? [],
          };
        } catch (error) {
          return refuse(reasonFrom(error, 'webauthn.create'), 'bad-request');
        }
        // The id the browser reports must be the one the authenticator attested to.
        if (response.id !== credential.id)
          return refuse('credential id differs from the attested credential', 'bad-request');
        // The registration response carries no user handle: the ceremony's is bound to the
        // credential here and every later assertion that returns one must match it.
        // §7.1 step 26: a credential id already enrolled is refused, before the code is spent.
        if ((await store.passkeys.get(credential.id)) !== undefined) {
          return refuse('this passkey is already enrolled', 'conflict');
        }
        const publicKeyJwk = p256Jwk(credential.publicKey);
        if (publicKeyJwk === undefined) return refuse('the passkey key is not a P-256 (ES256) key', 'bad-request');
        // Only now is the code used, atomically: a cancelled prompt leaves it usable, a second
        // registration with the same code fails here.
        if (!(await store.enrollment.consumeCode(role, ceremony.codeHash, now.getTime()))) {
          return refuse('this enrollment code was already used or has expired; ask the operator for a new one');
        }
        const memberDid = household.members[role];
        const enrollment = await household.issue({
          signer: 'admin',
          type: 'PasskeyEnrollment',
          subject: memberDid,
          claims: { role, credentialId: credential.id, publicKeyJwk },
          now,
        });
        const added = await store.passkeys.add({
          credentialId: credential.id,
          role,
          memberDid,
          userHandle: ceremony.userHandle,
          publicKeyCose: Buffer.from(credential.publicKey).toString('base64url'),
          publicKeyJwk,
          counter: credential.counter,
          transports: [...credential.transports],
          enrollment,
          createdAt: now.getTime(),
        });
        if (!added) return refuse('this passkey is already enrolled', 'conflict');
        emit({ kind: 'passkey-enrolled', role, memberDid, credentialId: credential.id });
        const session = await signIn({ role, memberDid, credentialId: credential.id }, now.getTime());
        emit({ kind: 'sign-in-succeeded', role, credentialId: credential.id });
        return { verified: true, session };
      },
    },

    signIn: {
      async options({ role }) {
        const now = clock().getTime();
        const offered = role === undefined ? await allPasskeys() : await store.passkeys.listByRole(role);
        const request = await generateAuthenticationOptions({
          rpID: rpId,
          allowCredentials: offered.map((passkey) => ({
            id: passkey.credentialId,
            transports: [...passkey.transports],
          })),
          userVerification: 'required',
          timeout: ceremonyLifetimeMs,
        });
        const ceremonyId = randomBytes(16).toString('base64url');
        await store.ceremonies.put(
          {
            id: ceremonyId,
            kind: 'sign-in',
            challenge: request.challenge,
            ...(role === undefined ? {} : { role }),
            expiresAt: now + ceremonyLifetimeMs,
          },
          now,
        );
        return { ok: true, ceremonyId, options: request };
      },

      async verify({ ceremonyId, response }) {
        const now = clock().getTime();
        const ceremony = await takeCeremony(ceremonyId, 'sign-in');
        if (ceremony === undefined)
          return refusePasskey('sign-in', 'unknown or already used sign-in ceremony; start again', 'bad-request');
        if (ceremony.expiresAt <= now)
          return refusePasskey('sign-in', 'the sign-in took too long; start again', 'unauthenticated');
        // The allowCredentials offered: the hinted role's passkeys, or every enrolled one.
        const allowed = ceremony.role === undefined ? undefined : await store.passkeys.listByRole(ceremony.role);
        const result = await verifyAssertion({
          ceremony: 'sign-in',
          response,
          expectedChallenge: ceremony.challenge,
          allowed,
          now,
        });
        if (!result.verified) return result;
        const session = await signIn(result.passkey, now);
        emit({ kind: 'sign-in-succeeded', role: result.passkey.role, credentialId: result.passkey.credentialId });
        return { verified: true, session };
      },
    },

    approval: {
      async options({ session, approvalId }) {
        const now = clock().getTime();
        const refuse = (reason: string, code: IdentityErrorCode) => refusePasskey('approval', reason, code);
        const current = await liveSession(session, now);
        if (current === undefined)
          return refuse('not signed in, or the session expired; sign in again', 'unauthenticated');
        const role = current.role;
        const approval = await store.approvals.get(approvalId);
        if (approval === undefined) return refuse('no such approval request', 'not-found');
        if (approval.status !== 'pending') return refuse(`this request is ${approval.status}, not pending`, 'conflict');
        if (approval.expiresAt <= now) return refuse('this request has expired', 'conflict');
        if (!approval.requiredRoles.includes(role))
          return refuse(`this request does not need the ${role}'s approval`, 'forbidden');
        if (approval.approvals[role] !== undefined)
          return refuse(`the ${role} has already approved this request`, 'conflict');
        // The challenge is the 32 digest bytes of the invoice hash (SPEC §5.2): the passkey signs
        // over this exact invoice and nothing else.
        const digest = Buffer.from(approval.invoiceHash, 'base64url');
        if (digest.length !== 32) return refuse('the request has a malformed invoice hash', 'conflict');
        const passkeys = await store.passkeys.listByRole(role);
        const request = await generateAuthenticationOptions({
          rpID: rpId,
          challenge: new Uint8Array(digest),
          allowCredentials: passkeys.map((passkey) => ({
            id: passkey.credentialId,
            transports: [...passkey.transports],
          })),
          userVerification: 'required',
          timeout: ceremonyLifetimeMs,
        });
        const ceremonyId = randomBytes(16).toString('base64url');
        await store.ceremonies.put(
          {
            id: ceremonyId,
            kind: 'approval',
            challenge: request.challenge,
            role,
            approvalId,
            expiresAt: now + ceremonyLifetimeMs,
          },
          now,
        );
        return { ok: true, ceremonyId, options: request };
      },

      async verify({ session, ceremonyId, response }) {
        const now = clock().getTime();
        const refuse = (reason: string, code: IdentityErrorCode) => refusePasskey('approval', reason, code);
        const current = await liveSession(session, now);
        if (current === undefined)
          return refuse('not signed in, or the session expired; sign in again', 'unauthenticated');
        const ceremony = await takeCeremony(ceremonyId, 'approval');
        if (ceremony?.approvalId === undefined)
          return refuse('unknown or already used approval ceremony; start again', 'bad-request');
        // The ceremony was started by this role for this request; another role's session cannot finish it.
        if (ceremony.role !== current.role) return refuse('this approval was started by another role', 'forbidden');
        if (ceremony.expiresAt <= now) return refuse('the approval took too long; start again', 'unauthenticated');
        const approval = await store.approvals.get(ceremony.approvalId);
        if (approval === undefined) return refuse('no such approval request', 'not-found');
        // The challenge must still be this request's invoice hash: the signature binds this invoice.
        if (Buffer.from(approval.invoiceHash, 'base64url').toString('base64url') !== ceremony.challenge) {
          return refuse('the challenge is not this request\u2019s invoice hash', 'conflict');
        }
        const allowed = await store.passkeys.listByRole(current.role);
        const result = await verifyAssertion({
          ceremony: 'approval',
          response,
          expectedChallenge: ceremony.challenge,
          allowed,
          now,
        });
        if (!result.verified) return result;
        // The approval's role is the passkey's enrolled role (equal to the session's: see allowed).
        const outcome = await approvals.approve({
          approvalId: ceremony.approvalId,
          role: result.passkey.role,
          assertion: {
            credentialId: result.passkey.credentialId,
            authenticatorData: response.response.authenticatorData,
            clientDataJSON: response.response.clientDataJSON,
            signature: response.response.signature,
          },
        });
        if (!outcome.ok) return refuse(outcome.reason, 'conflict');
        return { verified: true, record: outcome.record };
      },
    },

    call: {
      async options({ session, requestId }) {
        const now = clock().getTime();
        const refuse = (reason: string, code: IdentityErrorCode) => refusePasskey('approval', reason, code);
        const current = await liveSession(session, now);
        if (current === undefined)
          return refuse('not signed in, or the session expired; sign in again', 'unauthenticated');
        const role = current.role;
        const view = await callApprovals?.get(requestId);
        if (view === undefined) return refuse('no such call-approval request', 'not-found');
        if (view.status !== 'pending') return refuse(`this request is ${view.status}, not pending`, 'conflict');
        if (!view.requiredRoles.includes(role))
          return refuse(`this call does not need the ${role}'s approval`, 'forbidden');
        if (view.approvedRoles.includes(role)) return refuse(`the ${role} has already approved this call`, 'conflict');
        // The challenge is the 32 digest bytes of the call hash: the passkey signs this exact call.
        const digest = Buffer.from(view.callHash, 'base64url');
        if (digest.length !== 32) return refuse('the request has a malformed call hash', 'conflict');
        const passkeys = await store.passkeys.listByRole(role);
        const request = await generateAuthenticationOptions({
          rpID: rpId,
          challenge: new Uint8Array(digest),
          allowCredentials: passkeys.map((passkey) => ({
            id: passkey.credentialId,
            transports: [...passkey.transports],
          })),
          userVerification: 'required',
          timeout: ceremonyLifetimeMs,
        });
        const ceremonyId = randomBytes(16).toString('base64url');
        // An approval ceremony whose request id is marked as a call's: the ceremony table stays as it is.
        await store.ceremonies.put(
          {
            id: ceremonyId,
            kind: 'approval',
            challenge: request.challenge,
            role,
            approvalId: `${callCeremonyPrefix}${requestId}`,
            expiresAt: now + ceremonyLifetimeMs,
          },
          now,
        );
        return { ok: true, ceremonyId, options: request };
      },

      async verify({ session, ceremonyId, response }) {
        const now = clock().getTime();
        const refuse = (reason: string, code: IdentityErrorCode) => refusePasskey('approval', reason, code);
        const current = await liveSession(session, now);
        if (current === undefined)
          return refuse('not signed in, or the session expired; sign in again', 'unauthenticated');
        const ceremony = await takeCeremony(ceremonyId, 'approval');
        const requestId = ceremony?.approvalId?.startsWith(callCeremonyPrefix)
          ? ceremony.approvalId.slice(callCeremonyPrefix.length)
          : undefined;
        if (ceremony === undefined || requestId === undefined)
          return refuse('unknown or already used approval ceremony; start again', 'bad-request');
        if (ceremony.role !== current.role) return refuse('this approval was started by another role', 'forbidden');
        if (ceremony.expiresAt <= now) return refuse('the approval took too long; start again', 'unauthenticated');
        const view = await callApprovals?.get(requestId);
        if (view === undefined) return refuse('no such call-approval request', 'not-found');
        // The challenge must still be this call's hash: the signature binds this call.
        if (Buffer.from(view.callHash, 'base64url').toString('base64url') !== ceremony.challenge) {
          return refuse('the challenge is not this call\u2019s hash', 'conflict');
        }
        const allowed = await store.passkeys.listByRole(current.role);
        const result = await verifyAssertion({
          ceremony: 'approval',
          response,
          expectedChallenge: ceremony.challenge,
          allowed,
          now,
        });
        if (!result.verified) return result;
        const outcome = await callApprovals?.approve({
          requestId,
          role: result.passkey.role,
          assertion: {
            credentialId: result.passkey.credentialId,
            authenticatorData: response.response.authenticatorData,
            clientDataJSON: response.response.clientDataJSON,
            signature: response.response.signature,
          },
        });
        if (outcome === undefined || !outcome.ok)
          return refuse(outcome?.reason ?? 'no call approvals here', 'conflict');
        const updated = await callApprovals?.get(requestId);
        if (updated === undefined) return refuse('no such call-approval request', 'not-found');
        return { verified: true, view: updated };
      },

      async decline({ session, requestId }) {
        const current = await liveSession(session, clock().getTime());
        if (current === undefined) return { ok: false, reason: 'not signed in, or the session expired; sign in again' };
        if (callApprovals === undefined) return { ok: false, reason: 'no such call-approval request' };
        return callApprovals.decline({ requestId, role: current.role });
      },

      async pendingFor(session) {
        const current = await liveSession(session, clock().getTime());
        return current === undefined || callApprovals === undefined ? [] : callApprovals.pendingFor(current.role);
      },
    },

    allowance: {
      async options({ session, form }) {
        const now = clock().getTime();
        const refuse = (reason: string, code: IdentityErrorCode) => refusePasskey('approval', reason, code);
        const current = await liveSession(session, now);
        if (current === undefined)
          return refuse('not signed in, or the session expired; sign in again', 'unauthenticated');
        if (current.role !== 'parent') return refuse('only the parent signs a standing allowance', 'forbidden');
        if (allowances === undefined) return refuse('this household has no standing allowances', 'not-found');
        // The terms are counted in the household's zone, and the form must have shown that zone:
        // if another window changed it since, the parent looks again rather than signing unseen terms.
        const { timeZone } = await profile.read();
        if (form.timeZone !== timeZone) {
          return refuse(
            `the form shows the time zone ${form.timeZone}, but the household's is ${timeZone}; look at the form again`,
            'conflict',
          );
        }
        // The merchant's name is the one the household trusts it under, never the form's.
        const merchant = await store.merchants.get(form.merchantDid);
        if (merchant === undefined) return refuse('that merchant is not one the household trusts', 'bad-request');
        const drafted = allowances.draft({ ...form, merchantName: merchant.name });
        if (!drafted.ok) return refuse(`these terms cannot be signed: ${drafted.reason}`, 'bad-request');
        const digest = Buffer.from(drafted.termsHash, 'base64url');
        const passkeys = await store.passkeys.listByRole('parent');
        const request = await generateAuthenticationOptions({
          rpID: rpId,
          challenge: new Uint8Array(digest),
          allowCredentials: passkeys.map((passkey) => ({
            id: passkey.credentialId,
            transports: [...passkey.transports],
          })),
          userVerification: 'required',
          timeout: ceremonyLifetimeMs,
        });
        const ceremonyId = randomBytes(16).toString('base64url');
        // The ceremony keeps the exact terms drafted: what verifies is what the window showed.
        await store.ceremonies.put(
          {
            id: ceremonyId,
            kind: 'approval',
            challenge: request.challenge,
            role: 'parent',
            approvalId: `${allowanceCeremonyPrefix}${canonicalTerms(drafted.terms)}`,
            expiresAt: now + ceremonyLifetimeMs,
          },
          now,
        );
        return { ok: true, ceremonyId, options: request, terms: drafted.terms };
      },

      async verify({ session, ceremonyId, response }) {
        const now = clock().getTime();
        const refuse = (reason: string, code: IdentityErrorCode) => refusePasskey('approval', reason, code);
        const current = await liveSession(session, now);
        if (current === undefined)
          return refuse('not signed in, or the session expired; sign in again', 'unauthenticated');
        if (current.role !== 'parent') return refuse('only the parent signs a standing allowance', 'forbidden');
        const ceremony = await takeCeremony(ceremonyId, 'approval');
        const terms = ceremony?.approvalId?.startsWith(allowanceCeremonyPrefix)
          ? parseCanonicalTerms(ceremony.approvalId.slice(allowanceCeremonyPrefix.length))
          : undefined;
        if (ceremony === undefined || terms === undefined || allowances === undefined)
          return refuse('unknown or already used allowance ceremony; start again', 'bad-request');
        if (ceremony.role !== 'parent') return refuse('this ceremony was started by another role', 'forbidden');
        if (ceremony.expiresAt <= now) return refuse('the signing took too long; start again', 'unauthenticated');
        // The challenge must be these terms' hash: the signature binds these terms and no others.
        if (allowanceHashOf(canonicalTerms(terms)) !== ceremony.challenge)
          return refuse('the challenge is not these terms\u2019 hash', 'conflict');
        const result = await verifyAssertion({
          ceremony: 'approval',
          response,
          expectedChallenge: ceremony.challenge,
          allowed: await store.passkeys.listByRole('parent'),
          now,
        });
        if (!result.verified) return result;
        const issued = await allowances.issue({
          terms,
          assertion: {
            credentialId: result.passkey.credentialId,
            authenticatorData: response.response.authenticatorData,
            clientDataJSON: response.response.clientDataJSON,
            signature: response.response.signature,
          },
        });
        if (!issued.ok) return refuse(issued.reason, 'conflict');
        return { verified: true, record: issued.record, terms };
      },

      async list(session) {
        const current = await liveSession(session, clock().getTime());
        if (current === undefined)
          return refusePasskey('approval', 'not signed in, or the session expired; sign in again', 'unauthenticated');
        if (current.role !== 'parent')
          return refusePasskey('approval', 'only the parent sees the standing allowances', 'forbidden');
        const merchants = (await store.merchants.list()).map((merchant) => ({
          did: merchant.did,
          name: merchant.name,
        }));
        return { ok: true, allowances: allowances === undefined ? [] : await allowances.list(), merchants };
      },

      async revoke({ session, allowanceId }) {
        const current = await liveSession(session, clock().getTime());
        if (current === undefined)
          return refusePasskey('approval', 'not signed in, or the session expired; sign in again', 'unauthenticated');
        if (current.role !== 'parent')
          return refusePasskey('approval', 'only the parent revokes an allowance', 'forbidden');
        if (allowances === undefined)
          return refusePasskey('approval', 'this household has no standing allowances', 'not-found');
        const revoked = await allowances.revoke(allowanceId);
        return revoked.ok ? revoked : refusePasskey('approval', revoked.reason, 'conflict');
      },
    },

    profile: {
      async read(session) {
        const current = await liveSession(session, clock().getTime());
        if (current === undefined)
          return refusePasskey('approval', 'not signed in, or the session expired; sign in again', 'unauthenticated');
        return { ok: true, profile: await profile.read() };
      },

      async update({ session, change }) {
        const current = await liveSession(session, clock().getTime());
        if (current === undefined)
          return refusePasskey('approval', 'not signed in, or the session expired; sign in again', 'unauthenticated');
        // The parent names the household's members, the child included: a name the child chose
        // could read as someone else ("Mum") in the parent's window.
        if (current.role !== 'parent')
          return refusePasskey('approval', "only the parent changes the household's names and time zone", 'forbidden');
        const updated = await profile.update(change);
        return updated.ok ? updated : refusePasskey('approval', updated.reason, 'bad-request');
      },
    },

    async decline({ session, approvalId }) {
      const current = await liveSession(session, clock().getTime());
      if (current === undefined) return { ok: false, reason: 'not signed in, or the session expired; sign in again' };
      return approvals.decline({ approvalId, role: current.role });
    },

    async pendingFor(session) {
      const current = await liveSession(session, clock().getTime());
      return current === undefined ? [] : approvals.pendingFor(current.role);
    },

    async findSession(token) {
      if (!/^[A-Za-z0-9_-]{43}$/.test(token)) return undefined;
      const tokenHash = hashSessionToken(token);
      const current = await store.sessions.get(tokenHash);
      if (current === undefined) return undefined;
      if (current.expiresAt <= clock().getTime()) {
        await store.sessions.delete(tokenHash);
        return undefined;
      }
      return current;
    },

    async signOut(token) {
      await store.sessions.delete(hashSessionToken(token));
    },
  };

  async function takeCeremony(id: string, kind: CeremonyRecord['kind']): Promise<CeremonyRecord | undefined> {
    const ceremony = await store.ceremonies.take(id);
    return ceremony?.kind === kind ? ceremony : undefined;
  }

  async function allPasskeys(): Promise<PasskeyRecord[]> {
    const lists = await Promise.all([store.passkeys.listByRole('child'), store.passkeys.listByRole('parent')]);
    return lists.flat();
  }
}

const counterWentBackwards = 'sign counter went backwards: possible cloned authenticator';

/**
 * Refuses any cross-origin use (WebAuthn L3 §7.1 step 10 / §7.2 step 14): a `crossOrigin` other
 * than absent or the boolean `false`, or any `topOrigin`. `undefined` when first-party.
 */
function checkFraming(clientDataJSON: unknown): string | undefined {
  if (typeof clientDataJSON !== 'string') return 'clientDataJSON missing';
  const clientData = decodeSegment(clientDataJSON);
  if (clientData === undefined) return 'clientDataJSON is not a JSON object';
  return framingRefusal(clientData);
}

/** The `fmt` of an attestation object, or `undefined` when it is not one. */
function attestationFormat(attestationObject: unknown): string | undefined {
  if (typeof attestationObject !== 'string') return undefined;
  try {
    const fmt: unknown = decodeAttestationObject(new Uint8Array(Buffer.from(attestationObject, 'base64url'))).get(
      'fmt',
    );
    return typeof fmt === 'string' ? fmt : undefined;
  } catch {
    // Not CBOR: the caller refuses the registration.
    return undefined;
  }
}

/** The P-256 public JWK of an ES256 COSE key, validated as a point on the curve; `undefined` otherwise. */
function p256Jwk(publicKeyCose: Uint8Array): Record<string, string> | undefined {
  try {
    const key = decodeCredentialPublicKey(new Uint8Array(publicKeyCose));
    if (!cose.isCOSEPublicKeyEC2(key)) return undefined;
    const x = key.get(cose.COSEKEYS.x);
    const y = key.get(cose.COSEKEYS.y);
    if (key.get(cose.COSEKEYS.alg) !== es256 || key.get(cose.COSEKEYS.crv) !== cose.COSECRV.P256) return undefined;
    if (x?.length !== 32 || y?.length !== 32) return undefined;
    const jwk = {
      kty: 'EC',
      crv: 'P-256',
      x: Buffer.from(x).toString('base64url'),
      y: Buffer.from(y).toString('base64url'),
    };
    // node:crypto refuses a point that is not on the curve.
    createPublicKey({ key: jwk, format: 'jwk' });
    return jwk;
  } catch {
    // Not a usable key: the caller refuses the registration.
    return undefined;
  }
}

/**
 * SimpleWebAuthn reports failures as thrown Errors whose messages quote the challenge; this maps
 * them to reasons that say which check failed and quote nothing from the ceremony.
 */
function reasonFrom(error: unknown, expectedType: 'webauthn.create' | 'webauthn.get'): string {
  const message = error instanceof Error ? error.message : '';
  const rules: ReadonlyArray<readonly [RegExp, string]> = [
    [/response type/i, `wrong clientData type (expected ${expectedType})`],
    [/challenge/i, 'challenge does not match this ceremony'],
    [/top origin/i, 'cross-origin ceremony refused (topOrigin present)'],
    [/origin/i, 'origin does not match this site'],
    [/RP ID/i, 'rpIdHash does not match this relying party'],
    [/User presence|not present/i, 'user presence (UP) flag missing'],
    [/User verification/i, 'user verification (UV) flag missing'],
    [/counter/i, counterWentBackwards],
    [/alg/i, 'unsupported public key algorithm (only ES256 is accepted)'],
    [/credential ID|credential type|base64url/i, 'malformed credential'],
  ];
  return rules.find(([pattern]) => pattern.test(message))?.[1] ?? 'the passkey response could not be verified';
}
