import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { base58 } from '@scure/base';
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type CredentialType,
  type CredentialVerifier,
  createCredentialVerifier,
  createVeramoVerifier,
  type Household,
  householdKeys,
  openHousehold,
} from '../../identity/index';
import { openSqliteHouseholdStore } from '../../lib/store';

// Both verifiers see the same credentials — Veramo's own output and tokens signed by jose, an
// implementation this project does not control — and must agree on every one.
let dataDir: string;
let household: Household;
let close: () => void;
let verifiers: Record<'hot path' | 'Veramo', CredentialVerifier>;
let jose: {
  did: string;
  sign: (payload: JWTPayload) => Promise<string>;
  /** Signs any header, even one jose would refuse to produce (an unknown `crit`). */
  signRaw: (header: Record<string, unknown>, payload: JWTPayload) => Promise<string>;
};
const now = new Date();
const seconds = Math.floor(now.getTime() / 1000);

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'emcp-credentials-'));
  const store = openSqliteHouseholdStore({ path: join(dataDir, 'household.sqlite') });
  close = () => store.close();
  household = await openHousehold({ store: store.identity, dataDir });
  verifiers = {
    'hot path': createCredentialVerifier(householdKeys(household)),
    Veramo: createVeramoVerifier({ adminDocument: household.adminDocument }),
  };
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const x = Buffer.from((await exportJWK(publicKey)).x ?? '', 'base64url');
  const did = `did:key:z${base58.encode(Uint8Array.from([0xed, 0x01, ...x]))}`;
  jose = {
    did,
    sign: (payload) => new SignJWT(payload).setProtectedHeader({ alg: 'EdDSA', typ: 'JWT' }).sign(privateKey),
    signRaw: async (header, payload) => {
      const input = `${encode(header)}.${encode(payload)}`;
      const signature = await crypto.subtle.sign('Ed25519', privateKey, Buffer.from(input, 'ascii'));
      return `${input}.${Buffer.from(signature).toString('base64url')}`;
    },
  };
});

afterAll(async () => {
  close();
  await rm(dataDir, { recursive: true, force: true });
});

/** A well-formed OrderApproval payload in the one claim layout, signed by the jose did:key. */
function approvalPayload(overrides: Record<string, unknown> = {}): JWTPayload {
  return {
    iss: jose.did,
    sub: jose.did,
    jti: `urn:uuid:${randomUUID()}`,
    iat: seconds - 10,
    nbf: seconds - 10,
    exp: seconds + 600,
    vc: {
      '@context': ['https://www.w3.org/2018/credentials/v1'],
      type: ['VerifiableCredential', 'OrderApproval'],
      credentialSubject: { role: 'child', invoiceHash: 'x', approvalId: 'y' },
    },
    ...overrides,
  };
}

async function verdicts(jws: string, type: CredentialType = 'OrderApproval', issuer?: string) {
  const expected = { type, now, ...(issuer === undefined ? {} : { issuer }) };
  return {
    hot: await verifiers['hot path'](jws, expected),
    veramo: await verifiers.Veramo(jws, expected),
  };
}

describe('credential verification: the hot path and Veramo agree', () => {
  it('accepts what Veramo issued and what jose signed in the same layout', async () => {
    const issued = await household.issue({
      signer: 'parent',
      type: 'OrderApproval',
      subject: household.members.parent,
      claims: { role: 'parent', invoiceHash: 'h', approvalId: 'a' },
      now,
    });
    for (const jws of [issued, await jose.sign(approvalPayload())]) {
      const { hot, veramo } = await verdicts(jws);
      expect(hot.verified, JSON.stringify(hot)).toBe(true);
      expect(veramo.verified, JSON.stringify(veramo)).toBe(true);
      expect(hot).toEqual(veramo);
    }
  });

  it('writes the one claim layout: iss, sub, urn:uuid jti, iat = nbf, exp = iat + lifetime, no credentialSubject.id', async () => {
    const issued = await household.issue({
      signer: 'admin',
      type: 'PasskeyEnrollment',
      subject: household.members.child,
      claims: { role: 'child', credentialId: 'abc', publicKeyJwk: { kty: 'EC' } },
      now,
    });
    const payload = JSON.parse(Buffer.from(issued.split('.')[1] ?? '', 'base64url').toString('utf8'));
    expect(payload).toMatchObject({
      iss: household.adminDid,
      sub: household.members.child,
      iat: seconds,
      nbf: seconds,
      exp: seconds + 365 * 24 * 3600,
      vc: { type: ['VerifiableCredential', 'PasskeyEnrollment'], credentialSubject: { role: 'child' } },
    });
    expect(payload.jti).toMatch(/^urn:uuid:[0-9a-f-]{36}$/);
    expect(payload.vc.credentialSubject.id).toBeUndefined();
  });

  const refusals: Array<[string, () => Promise<string>, CredentialType?, (() => string)?]> = [
    ['a flipped signature byte', async () => flip(await jose.sign(approvalPayload()), 2)],
    [
      'a payload changed after signing',
      async () => {
        const [header, , signature] = (await jose.sign(approvalPayload())).split('.');
        const forged = Buffer.from(JSON.stringify(approvalPayload({ sub: household.members.parent }))).toString(
          'base64url',
        );
        return `${header}.${forged}.${signature}`;
      },
    ],
    ['another credential type than expected', () => jose.sign(approvalPayload()), 'FamilyMembership'],
    [
      'an expired credential',
      () => jose.sign(approvalPayload({ iat: seconds - 900, nbf: seconds - 900, exp: seconds - 1 })),
    ],
    ['an iat in the future', () => jose.sign(approvalPayload({ iat: seconds + 300 }))],
    ['an nbf in the future', () => jose.sign(approvalPayload({ nbf: seconds + 300 }))],
    ['a lifetime longer than the type allows', () => jose.sign(approvalPayload({ exp: seconds + 3600 }))],
    ['no exp', () => jose.sign(approvalPayload({ exp: undefined }))],
    ['no iat', () => jose.sign(approvalPayload({ iat: undefined }))],
    ['no nbf', () => jose.sign(approvalPayload({ nbf: undefined }))],
    ['no sub on an approval', () => jose.sign(approvalPayload({ sub: undefined }))],
    ['a jti that is not a urn:uuid', () => jose.sign(approvalPayload({ jti: 'order-1' }))],
    [
      'a crit header',
      () => jose.signRaw({ alg: 'EdDSA', crit: ['urn:example:x'], 'urn:example:x': 1 }, approvalPayload()),
    ],
    [
      'an alg none token',
      async () => {
        const body = Buffer.from(JSON.stringify(approvalPayload())).toString('base64url');
        return `${Buffer.from('{"alg":"none"}').toString('base64url')}.${body}.`;
      },
    ],
    [
      'an issuer other than the one expected',
      () => jose.sign(approvalPayload()),
      'OrderApproval',
      () => household.adminDid,
    ],
    ['a did:web other than the pinned admin', () => jose.sign(approvalPayload({ iss: 'did:web:attacker.example' }))],
    ['the admin DID on a token the admin did not sign', () => jose.sign(approvalPayload({ iss: household.adminDid }))],
  ];

  it.each(refusals)('both refuse %s', async (_name, make, type = 'OrderApproval', issuer) => {
    const { hot, veramo } = await verdicts(await make(), type, issuer?.());
    expect(hot.verified, JSON.stringify(hot)).toBe(false);
    expect(veramo.verified, JSON.stringify(veramo)).toBe(false);
    if (!hot.verified) expect(hot.reason).toMatch(/^the \w+ is not acceptable: .+/);
  });
});

function encode(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

function flip(jws: string, at: number): string {
  const [header, payload, signature = ''] = jws.split('.');
  const bytes = Buffer.from(signature, 'base64url');
  bytes[at] = (bytes[at] ?? 0) ^ 0x01;
  return `${header}.${payload}.${bytes.toString('base64url')}`;
}
