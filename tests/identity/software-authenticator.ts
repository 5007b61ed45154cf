import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { isoCBOR } from '@simplewebauthn/server/helpers';

/** One thing a test breaks in a ceremony; everything not named is what a conforming authenticator and browser send. */
export interface CeremonyOverrides {
  /** clientData `type` (`webauthn.create` / `webauthn.get` by default). */
  readonly type?: string;
  /** clientData `challenge` (base64url). */
  readonly challenge?: string;
  /** clientData `origin`. */
  readonly origin?: string;
  /** The rp id whose SHA-256 goes into `authenticatorData`. */
  readonly rpId?: string;
  /** Flags to drop: `up: false` clears UP, `uv: false` clears UV. */
  readonly flags?: { readonly up?: boolean; readonly uv?: boolean };
  /** The sign counter to report (and remember). */
  readonly counter?: number;
  /**
   * clientData `crossOrigin` (default `false`): any JSON value a hostile client could send, or
   * `absent` to leave the member out as older browsers do.
   */
  readonly crossOrigin?: boolean | string | number | null | 'absent' | Readonly<Record<string, unknown>>;
  /** clientData `topOrigin`; absent by default. */
  readonly topOrigin?: string;
}

/** Registration overrides: also the attestation format. */
export interface RegistrationOverrides extends CeremonyOverrides {
  /** `packed` produces a real self-attestation (signed by the credential key); any other non-`none` value an empty statement. */
  readonly fmt?: string;
}

/** Assertion overrides: also the credential used and the user handle returned. */
export interface AssertionOverrides extends CeremonyOverrides {
  /** Assert with this credential even if the options do not allow it (what a hostile client would do). */
  readonly credentialId?: string;
  /** The `userHandle` to return; `null` returns none. */
  readonly userHandle?: string | null;
}

/** A credential the authenticator holds. */
export interface SoftwareCredential {
  readonly id: string;
  readonly userHandle: string;
  readonly publicKey: KeyObject;
  counter: number;
}

/** A platform authenticator plus the browser around it, in software. */
export interface SoftwareAuthenticator {
  readonly credentials: readonly SoftwareCredential[];
  register(
    options: PublicKeyCredentialCreationOptionsJSON,
    overrides?: RegistrationOverrides,
  ): RegistrationResponseJSON;
  assert(options: PublicKeyCredentialRequestOptionsJSON, overrides?: AssertionOverrides): AuthenticationResponseJSON;
}

const flagUp = 0x01;
const flagUv = 0x04;
const flagAt = 0x40;

/**
 * A real software authenticator for tests (ES256 keys from node:crypto, real `authenticatorData`,
 * `clientDataJSON` and DER signatures, attestation `none`), so registration, sign-in and approval
 * run through the real `@simplewebauthn/server` verification. `overrides` break exactly one thing.
 */
export function createSoftwareAuthenticator(settings: { origin: string; rpId: string }): SoftwareAuthenticator {
  const held: Array<SoftwareCredential & { readonly privateKey: KeyObject }> = [];

  const clientData = (type: string, challenge: string, overrides: CeremonyOverrides): Buffer => {
    const data: Record<string, unknown> = {
      type: overrides.type ?? type,
      challenge: overrides.challenge ?? challenge,
      origin: overrides.origin ?? settings.origin,
    };
    if (overrides.crossOrigin !== 'absent')
      data.crossOrigin = overrides.crossOrigin === undefined ? false : overrides.crossOrigin;
    if (overrides.topOrigin !== undefined) data.topOrigin = overrides.topOrigin;
    return Buffer.from(JSON.stringify(data), 'utf8');
  };

  const authenticatorDataHead = (overrides: CeremonyOverrides, counter: number, extraFlags: number): Buffer => {
    let flags = flagUp | flagUv | extraFlags;
    if (overrides.flags?.up === false) flags &= ~flagUp;
    if (overrides.flags?.uv === false) flags &= ~flagUv;
    const counterBytes = Buffer.alloc(4);
    counterBytes.writeUInt32BE(counter);
    return Buffer.concat([sha256(overrides.rpId ?? settings.rpId), Buffer.from([flags]), counterBytes]);
  };

  return {
    get credentials() {
      return held;
    },

    register(options, overrides = {}) {
      if (!options.pubKeyCredParams.some((parameter) => parameter.alg === -7)) {
        throw new Error('software authenticator: ES256 not offered');
      }
      const excluded = new Set((options.excludeCredentials ?? []).map((credential) => credential.id));
      const duplicate = held.find((credential) => excluded.has(credential.id));
      if (duplicate !== undefined) throw new Error('software authenticator: InvalidStateError (credential excluded)');
      const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const jwk = publicKey.export({ format: 'jwk' });
      const idBytes = randomBytes(32);
      const id = idBytes.toString('base64url');
      const counter = overrides.counter ?? 0;
      const coseKey = isoCBOR.encode(
        new Map<number, number | Uint8Array>([
          [1, 2],
          [3, -7],
          [-1, 1],
          [-2, new Uint8Array(Buffer.from(jwk.x ?? '', 'base64url'))],
          [-3, new Uint8Array(Buffer.from(jwk.y ?? '', 'base64url'))],
        ]),
      );
      const idLength = Buffer.alloc(2);
      idLength.writeUInt16BE(idBytes.length);
      const authData = Buffer.concat([
        authenticatorDataHead(overrides, counter, flagAt),
        Buffer.alloc(16),
        idLength,
        idBytes,
        Buffer.from(coseKey),
      ]);
      const clientDataJSON = clientData('webauthn.create', options.challenge, overrides);
      const fmt = overrides.fmt ?? 'none';
      const attStmt = new Map<string, number | Uint8Array>();
      if (fmt === 'packed') {
        // Self-attestation: signed by the credential's own key over authData || SHA-256(clientDataJSON).
        attStmt.set('alg', -7);
        attStmt.set(
          'sig',
          new Uint8Array(sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), privateKey)),
        );
      }
      const attestationObject = isoCBOR.encode(
        new Map<string, string | Uint8Array | Map<string, number | Uint8Array>>([
          ['fmt', fmt],
          ['attStmt', attStmt],
          ['authData', new Uint8Array(authData)],
        ]),
      );
      held.push({ id, userHandle: options.user.id, publicKey, privateKey, counter });
      return {
        id,
        rawId: id,
        type: 'public-key',
        authenticatorAttachment: 'platform',
        clientExtensionResults: {},
        response: {
          clientDataJSON: clientDataJSON.toString('base64url'),
          attestationObject: Buffer.from(attestationObject).toString('base64url'),
          transports: ['internal'],
          publicKeyAlgorithm: -7,
        },
      };
    },

    assert(options, overrides = {}) {
      const allowed = new Set((options.allowCredentials ?? []).map((credential) => credential.id));
      const credential =
        overrides.credentialId !== undefined
          ? held.find((candidate) => candidate.id === overrides.credentialId)
          : held.find((candidate) => allowed.size === 0 || allowed.has(candidate.id));
      if (credential === undefined) throw new Error('software authenticator: NotAllowedError (no matching credential)');
      credential.counter = overrides.counter ?? credential.counter + 1;
      const authData = authenticatorDataHead(overrides, credential.counter, 0);
      const clientDataJSON = clientData('webauthn.get', options.challenge, overrides);
      const signature = sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), credential.privateKey);
      const userHandle = overrides.userHandle === undefined ? credential.userHandle : overrides.userHandle;
      return {
        id: overrides.credentialId ?? credential.id,
        rawId: overrides.credentialId ?? credential.id,
        type: 'public-key',
        authenticatorAttachment: 'platform',
        clientExtensionResults: {},
        response: {
          clientDataJSON: clientDataJSON.toString('base64url'),
          authenticatorData: authData.toString('base64url'),
          signature: signature.toString('base64url'),
          ...(userHandle === null ? {} : { userHandle }),
        },
      };
    },
  };
}

function sha256(data: string | Buffer): Buffer {
  return createHash('sha256').update(data).digest();
}
