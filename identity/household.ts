import { randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, existsSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  createAgent,
  type ICredentialIssuer,
  type IDIDManager,
  type IIdentifier,
  type IKeyManager,
  type TAgent,
} from '@veramo/core';
import { CredentialProviderJWT } from '@veramo/credential-jwt';
import { CredentialPlugin } from '@veramo/credential-w3c';
import { DIDManager } from '@veramo/did-manager';
import { KeyDIDProvider } from '@veramo/did-provider-key';
import { WebDIDProvider } from '@veramo/did-provider-web';
import { KeyManager } from '@veramo/key-manager';
import { KeyManagementSystem, SecretBox } from '@veramo/kms-local';
import { type CredentialType, lifetimeSeconds } from './credentials';
import { householdTimeZoneSchema, serverTimeZone } from './household-profile';
import { IdentityError } from './identity-error';
import type { IdentityStore, Role } from './store';
import { veramoStores } from './veramo-stores';

/** Who signs a credential: the household admin, a member, or the settlement service. */
export type Signer = 'admin' | Role | 'settlement';

/** What {@link Household.issue} signs. */
export interface IssueRequest {
  readonly signer: Signer;
  readonly type: CredentialType;
  /** `sub`: the DID the credential is about. */
  readonly subject: string;
  /** `vc.credentialSubject` fields besides `id`. */
  readonly claims: Readonly<Record<string, unknown>>;
  /** `iat` = `nbf`; `exp` = now + the type's lifetime. */
  readonly now: Date;
  /** An earlier `exp` than the type's lifetime gives (an `Allowance` ends when its terms say); never a later one. */
  readonly expiresAt?: Date;
}

/** A W3C DID document, as served at `/.well-known/did.json` and pinned in the trust config. */
export interface DidDocument {
  readonly '@context': readonly string[];
  readonly id: string;
  readonly verificationMethod: ReadonlyArray<{
    readonly id: string;
    readonly type: string;
    readonly controller: string;
    readonly publicKeyJwk: Readonly<Record<string, string>>;
  }>;
  readonly assertionMethod: readonly string[];
  readonly authentication: readonly string[];
}

/** The household's identities and its signer (SPEC §5.1). Private keys never leave it. */
export interface Household {
  /** `did:web` of the household admin. */
  readonly adminDid: string;
  /** The admin's DID document: served by the app, pinned for verification. */
  readonly adminDocument: DidDocument;
  /** The admin's Ed25519 public JWK (from the pinned document). */
  readonly adminJwk: Readonly<Record<string, string>>;
  /** Member `did:key`s by role. */
  readonly members: Readonly<Record<Role, string>>;
  /** The members' `FamilyMembership` JWT-VCs by role. */
  readonly memberships: Readonly<Record<Role, string>>;
  /** The settlement service's `did:key`. */
  readonly settlementDid: string;
  readonly store: IdentityStore;
  /** Signs a JWT-VC in the one claim layout of SPEC §5.2. */
  issue(request: IssueRequest): Promise<string>;
}

/** Options of {@link openHousehold}. */
export interface OpenHouseholdOptions {
  readonly store: IdentityStore;
  /** The data folder: the key file that seals every private key lives here (mode 0600). */
  readonly dataDir: string;
  /** The admin's `did:web`; default `did:web:localhost%3A3000`. */
  readonly adminDid?: string;
  /** Clock for the membership credentials issued at setup. */
  readonly now?: () => Date;
  /**
   * The time zone a household without one is given (an IANA name): default the server's. Stored
   * once, at the first open (a new household, or one from before households had a zone); the
   * parent changes it in the parent window, and later opens keep it.
   */
  readonly timeZone?: string;
}

/** The household admin's `did:web` when none is configured (SPEC §5.1). */
export const defaultAdminDid = 'did:web:localhost%3A3000';

/** File name of the secret that seals the household's private keys. */
export const keyFileName = 'household.key';

/** The store lock household creation runs under. */
const householdLock = 'household-setup';

interface HouseholdRecord {
  readonly adminDid: string;
  readonly members: Record<Role, string>;
  readonly settlementDid: string;
  readonly memberships: Record<Role, string>;
}

/**
 * Opens the household, setting it up on first start (SPEC §5.1): the admin `did:web`, the member
 * and settlement `did:key`s, each member's `FamilyMembership`, and the household's time zone.
 * Idempotent: a second start on the same store and key file changes no key, DID, credential or zone.
 */
export async function openHousehold(options: OpenHouseholdOptions): Promise<Household> {
  const adminDid = options.adminDid ?? defaultAdminDid;
  if (!/^did:web:[A-Za-z0-9.%-]+(:[A-Za-z0-9._%-]+)*$/.test(adminDid)) {
    throw new IdentityError('household-invalid', `"${adminDid}" is not a did:web identifier`);
  }
  const now = options.now ?? (() => new Date());
  const existing = await options.store.records.get('household', 'household');
  // A household whose key file is gone cannot sign again: refuse rather than seal new keys with a new file.
  const secret = loadOrCreateKeyFile(options.dataDir, { create: existing === undefined });
  const stores = veramoStores(options.store.records, new SecretBox(secret));
  const agent = createSigningAgent(stores);

  let record: HouseholdRecord;
  if (existing !== undefined) {
    record = JSON.parse(existing) as HouseholdRecord;
    if (record.adminDid !== adminDid) {
      throw new IdentityError(
        'household-invalid',
        `this data folder belongs to the household ${record.adminDid}, not ${adminDid}; use another data folder`,
      );
    }
  } else {
    // Under the store's household lock, so instances starting at once on one empty store set up
    // one household: two setups would each write the admin's did:web with a key of their own.
    // Whoever gets the lock second finds the household the first one created and adopts it.
    record = await options.store.records.exclusive(householdLock, async () => {
      const landed = await options.store.records.get('household', 'household');
      if (landed !== undefined) return JSON.parse(landed) as HouseholdRecord;
      const created = await setUp(agent, adminDid, now());
      // First writer wins, even against a store whose lock a crashed holder's lease let go.
      if (await options.store.records.insert('household', 'household', JSON.stringify(created))) return created;
      return JSON.parse((await options.store.records.get('household', 'household')) ?? '') as HouseholdRecord;
    });
    if (record.adminDid !== adminDid) {
      throw new IdentityError(
        'household-invalid',
        `this data folder belongs to the household ${record.adminDid}, not ${adminDid}; use another data folder`,
      );
    }
  }
  // The zone allowances are counted in: first writer wins, so a second start never moves it.
  const zone = householdTimeZoneSchema.safeParse(options.timeZone ?? serverTimeZone());
  if (!zone.success) throw new IdentityError('household-invalid', `"${options.timeZone}" is not an IANA time zone`);
  await options.store.profile.initTimeZone({ timeZone: zone.data, setAt: now().getTime() });
  const admin = await agent.didManagerGet({ did: record.adminDid });
  // Opening the admin's private key proves the key file matches the store before anything is promised.
  await stores.privateKeyStore.getKey({ alias: admin.controllerKeyId ?? '' });
  const adminDocument = didDocumentOf(admin);
  const adminJwk = adminDocument.verificationMethod[0]?.publicKeyJwk ?? {};
  const signers: Record<Signer, string> = {
    admin: record.adminDid,
    child: record.members.child,
    parent: record.members.parent,
    settlement: record.settlementDid,
  };

  return {
    adminDid: record.adminDid,
    adminDocument,
    adminJwk,
    members: record.members,
    memberships: record.memberships,
    settlementDid: record.settlementDid,
    store: options.store,
    issue: (request) => issueCredential(agent, { ...request, issuer: signers[request.signer] }),
  };
}

async function setUp(agent: SigningAgent, adminDid: string, now: Date): Promise<HouseholdRecord> {
  // did:web's alias is the method-specific identifier; getOrCreate makes a crashed setup resumable.
  const admin = await agent.didManagerGetOrCreate({
    provider: 'did:web',
    alias: adminDid.slice('did:web:'.length),
    options: { keyType: 'Ed25519' },
  });
  const keyDid = async (alias: string) =>
    (await agent.didManagerGetOrCreate({ provider: 'did:key', alias, options: { keyType: 'Ed25519' } })).did;
  const members = { child: await keyDid('child'), parent: await keyDid('parent') };
  const settlementDid = await keyDid('settlement');
  const membership = (role: Role) =>
    issueCredential(agent, {
      issuer: admin.did,
      type: 'FamilyMembership',
      subject: members[role],
      claims: { role, household: admin.did },
      now,
    });
  return {
    adminDid: admin.did,
    members,
    settlementDid,
    memberships: { child: await membership('child'), parent: await membership('parent') },
  };
}

/** The admin's DID document from its Ed25519 key: one JsonWebKey2020 method for assertions. */
function didDocumentOf(admin: IIdentifier): DidDocument {
  const key = admin.keys.find((candidate) => candidate.type === 'Ed25519');
  if (!key) throw new IdentityError('household-invalid', `${admin.did} has no Ed25519 key`);
  const id = `${admin.did}#key-1`;
  return {
    '@context': ['https://www.w3.org/ns/did/v1', 'https://w3id.org/security/suites/jws-2020/v1'],
    id: admin.did,
    verificationMethod: [
      {
        id,
        type: 'JsonWebKey2020',
        controller: admin.did,
        publicKeyJwk: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(key.publicKeyHex, 'hex').toString('base64url') },
      },
    ],
    assertionMethod: [id],
    authentication: [id],
  };
}

type SigningAgent = TAgent<IDIDManager & IKeyManager & ICredentialIssuer>;

function createSigningAgent({ keyStore, privateKeyStore, didStore }: ReturnType<typeof veramoStores>): SigningAgent {
  return createAgent<IDIDManager & IKeyManager & ICredentialIssuer>({
    plugins: [
      new KeyManager({ store: keyStore, kms: { local: new KeyManagementSystem(privateKeyStore) } }),
      new DIDManager({
        store: didStore,
        defaultProvider: 'did:key',
        providers: {
          'did:key': new KeyDIDProvider({ defaultKms: 'local' }),
          'did:web': new WebDIDProvider({ defaultKms: 'local' }),
        },
      }),
      new CredentialPlugin([new CredentialProviderJWT()]),
    ],
  });
}

/**
 * Signs one JWT-VC in the claim layout of SPEC §5.2. Veramo's JWT encoding maps `id` → `jti`,
 * `issuanceDate` → `nbf`, `expirationDate` → `exp` and `credentialSubject.id` → `sub`; `iat` is set
 * from the same clock so the three time claims agree.
 */
async function issueCredential(
  agent: SigningAgent,
  request: Omit<IssueRequest, 'signer'> & { readonly issuer: string },
): Promise<string> {
  const iat = Math.floor(request.now.getTime() / 1000);
  const longest = iat + lifetimeSeconds[request.type];
  const exp = request.expiresAt === undefined ? longest : Math.floor(request.expiresAt.getTime() / 1000);
  if (!(exp > iat && exp <= longest)) {
    throw new IdentityError('issue-failed', `a ${request.type} must expire after it is issued and within its lifetime`);
  }
  try {
    const credential = await agent.createVerifiableCredential({
      proofFormat: 'jwt',
      credential: {
        '@context': ['https://www.w3.org/2018/credentials/v1'],
        type: ['VerifiableCredential', request.type],
        id: `urn:uuid:${randomUUID()}`,
        issuer: { id: request.issuer },
        issuanceDate: new Date(iat * 1000).toISOString(),
        expirationDate: new Date(exp * 1000).toISOString(),
        iat,
        credentialSubject: { ...request.claims, id: request.subject },
      },
    });
    const jwt = (credential.proof as { jwt?: unknown }).jwt;
    if (typeof jwt !== 'string') throw new Error('no JWT proof');
    return jwt;
  } catch (error) {
    throw new IdentityError('issue-failed', `cannot issue the ${request.type} credential`, { cause: error });
  }
}

/**
 * Reads the secret that seals the household's private keys, creating it (mode 0600) on first start.
 * Creation is create-if-absent, so two first starts agree on one file.
 */
function loadOrCreateKeyFile(dataDir: string, options: { readonly create: boolean }): string {
  const path = join(dataDir, keyFileName);
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    if (!existsSync(path)) {
      if (!options.create) {
        throw new IdentityError(
          'key-file',
          `the household key file ${keyFileName} is missing from the data folder: its private keys cannot be opened`,
        );
      }
      const temp = `${path}.${process.pid}.${randomUUID()}.tmp`;
      writeFileSync(temp, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
      try {
        linkSync(temp, path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      } finally {
        rmSync(temp, { force: true });
      }
    }
    chmodSync(path, 0o600);
    const secret = readFileSync(path, 'utf8').trim();
    if (!/^[0-9a-f]{64}$/.test(secret)) {
      throw new IdentityError('key-file', `the household key file ${keyFileName} is not 32 bytes of hex`);
    }
    return secret;
  } catch (error) {
    if (error instanceof IdentityError) throw error;
    throw new IdentityError('key-file', `cannot read or create the household key file ${keyFileName}`, {
      cause: error,
    });
  }
}
