import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type {
  ApprovalRecord,
  CeremonyRecord,
  EnrollmentCodeRecord,
  MerchantRecord,
  PasskeyRecord,
  SessionRecord,
} from '../identity/index';
import { identityMigrations } from './identity-migrations';
import { type HouseholdStore, openSqliteHouseholdStore } from './store';

const folders: string[] = [];
const stores: HouseholdStore[] = [];
afterEach(() => {
  for (const store of stores.splice(0)) store.close();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** A fresh store in its own temporary folder. */
function fresh(): { store: HouseholdStore; path: string; folder: string } {
  const folder = mkdtempSync(join(tmpdir(), 'household-store-'));
  folders.push(folder);
  const path = join(folder, 'data', 'household.sqlite');
  const store = openSqliteHouseholdStore({ path });
  stores.push(store);
  return { store, path, folder };
}

function reopen(path: string): HouseholdStore {
  const store = openSqliteHouseholdStore({ path });
  stores.push(store);
  return store;
}

function migrationRows(path: string): unknown[] {
  const database = new Database(path, { readonly: true });
  try {
    return database.prepare('SELECT module, version, applied_at FROM schema_migrations ORDER BY module, version').all();
  } finally {
    database.close();
  }
}

const t0 = 1_750_000_000_000;

const passkey: PasskeyRecord = {
  credentialId: 'cred-child-1',
  role: 'child',
  memberDid: 'did:key:z6MkChild',
  userHandle: 'aGFuZGxl',
  publicKeyCose: 'pQECAyYgASFYIA',
  publicKeyJwk: { kty: 'EC', crv: 'P-256', x: 'xx', y: 'yy' },
  counter: 3,
  transports: ['internal', 'hybrid'],
  enrollment: 'eyJ.enrollment.jwt',
  createdAt: t0,
};

const approval: ApprovalRecord = {
  approvalId: 'approval-1',
  invoiceId: 'urn:uuid:invoice-1',
  invoice: 'eyJ.invoice.jws',
  invoiceHash: 'hash-1',
  merchantDid: 'did:key:z6MkShop',
  totalCents: 1500,
  currency: 'USD',
  requiredRoles: ['child', 'parent'],
  approvals: {},
  status: 'pending',
  createdAt: t0,
  expiresAt: t0 + 300_000,
  updatedAt: t0,
};

function approvalFor(index: number, overrides: Partial<ApprovalRecord> = {}): ApprovalRecord {
  return {
    ...approval,
    approvalId: `approval-${index}`,
    invoiceId: `urn:uuid:invoice-${index}`,
    createdAt: t0 + index,
    updatedAt: t0 + index,
    ...overrides,
  };
}

describe('openHouseholdStore: the file', () => {
  it('creates the missing data folder 0700 and the file 0600, and the WAL beside it 0600', async () => {
    const { store, path } = fresh();
    await store.identity.records.put('household', 'main', '{}');
    expect(statSync(join(path, '..')).mode & 0o777).toBe(0o700);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(`${path}-wal`).mode & 0o777).toBe(0o600);
    expect(store.location).toStrictEqual({ kind: 'sqlite', path });
  });

  it('tightens an existing file to 0600', () => {
    const folder = mkdtempSync(join(tmpdir(), 'household-store-'));
    folders.push(folder);
    const path = join(folder, 'household.sqlite');
    // An empty file is a valid empty SQLite database.
    writeFileSync(path, '', { mode: 0o644 });
    chmodSync(path, 0o644);
    stores.push(openSqliteHouseholdStore({ path }));
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('runs in WAL mode', () => {
    const { path } = fresh();
    const database = new Database(path, { readonly: true });
    try {
      expect(database.pragma('journal_mode', { simple: true })).toBe('wal');
    } finally {
      database.close();
    }
  });

  it('records every module migration on a fresh file and applies nothing on reopening', async () => {
    const { store, path } = fresh();
    await store.identity.merchants.add({
      did: 'did:web:shop',
      name: 'Shop',
      publicKeyJwk: { kty: 'OKP' },
      trustedAt: 1,
    });
    store.close();
    stores.splice(stores.indexOf(store), 1);
    const rows = migrationRows(path);
    const identityRows = rows.filter((row) => (row as { module: string }).module === 'identity');
    expect(identityRows.map((row) => (row as { version: number }).version)).toEqual(
      identityMigrations.map((migration) => migration.version),
    );
    expect(new Set(rows.map((row) => (row as { module: string }).module))).toEqual(
      new Set([
        'identity',
        'payments',
        'evidence',
        'mock-rail',
        'chat',
        'audit',
        'discovery',
        'pins',
        'limits',
        'call-approvals',
        'turn-leases',
        'allowances',
        'checkpoint-lease',
      ]),
    );

    const again = reopen(path);
    // Same rows, same applied_at: nothing re-ran, and the data is still there.
    expect(migrationRows(path)).toEqual(rows);
    expect(await again.identity.merchants.get('did:web:shop')).toMatchObject({ name: 'Shop' });
  });

  it('refuses a file whose identity schema is newer than the code, with the module and versions', () => {
    const { store, path } = fresh();
    store.close();
    stores.splice(stores.indexOf(store), 1);
    const database = new Database(path);
    database.prepare("INSERT INTO schema_migrations (module, version, applied_at) VALUES ('identity', 999, 0)").run();
    database.close();
    const known = identityMigrations.at(-1)?.version;
    expect(() => openSqliteHouseholdStore({ path })).toThrow(
      expect.objectContaining({
        name: 'IdentityError',
        code: 'store-failed',
        message: expect.stringContaining(
          `module "identity" is at version 999, newer than this code knows (${known})`,
        ) as unknown,
      }),
    );
  });

  it('wraps driver failures in IdentityError store-failed with the cause kept', async () => {
    const { store } = fresh();
    store.close();
    stores.splice(stores.indexOf(store), 1);
    await expect(store.identity.records.get('did', 'x')).rejects.toMatchObject({
      name: 'IdentityError',
      code: 'store-failed',
      message: 'identity store: records.get failed',
      cause: expect.any(TypeError) as unknown,
    });
  });
});

describe('records', () => {
  it('puts, replaces, gets, lists by kind and deletes', async () => {
    const { records } = fresh().store.identity;
    expect(await records.get('did', 'a')).toBeUndefined();
    await records.put('did', 'b', '{"v":1}');
    await records.put('did', 'a', '{"v":2}');
    await records.put('key', 'a', '{"k":1}');
    await records.put('did', 'b', '{"v":3}');
    expect(await records.get('did', 'b')).toBe('{"v":3}');
    expect(await records.list('did')).toStrictEqual([
      { id: 'a', value: '{"v":2}' },
      { id: 'b', value: '{"v":3}' },
    ]);
    expect(await records.delete('did', 'a')).toBe(true);
    expect(await records.delete('did', 'a')).toBe(false);
    expect(await records.get('did', 'a')).toBeUndefined();
    expect(await records.get('key', 'a')).toBe('{"k":1}');
  });

  it('insert is first-writer-wins', async () => {
    const { records } = fresh().store.identity;
    expect(await records.insert('household', 'main', 'first')).toBe(true);
    expect(await records.insert('household', 'main', 'second')).toBe(false);
    expect(await records.get('household', 'main')).toBe('first');
  });
});

describe('enrollment', () => {
  const code: EnrollmentCodeRecord = { role: 'parent', codeHash: 'hash-a', issuedAt: t0, expiresAt: t0 + 1000 };

  it('stores a code and reads it back without a usedAt', async () => {
    const { enrollment } = fresh().store.identity;
    expect(await enrollment.getCode('parent')).toBeUndefined();
    await enrollment.replaceCode(code);
    expect(await enrollment.getCode('parent')).toStrictEqual(code);
    expect(await enrollment.getCode('child')).toBeUndefined();
  });

  it('consumes a code once: a second consume is false', async () => {
    const { enrollment } = fresh().store.identity;
    await enrollment.replaceCode(code);
    expect(await enrollment.consumeCode('parent', 'hash-a', t0 + 10)).toBe(true);
    expect(await enrollment.consumeCode('parent', 'hash-a', t0 + 11)).toBe(false);
    expect(await enrollment.getCode('parent')).toStrictEqual({ ...code, usedAt: t0 + 10 });
  });

  it('refuses a wrong hash, another role and an expired code, without using the code', async () => {
    const { enrollment } = fresh().store.identity;
    await enrollment.replaceCode(code);
    expect(await enrollment.consumeCode('parent', 'hash-b', t0)).toBe(false);
    expect(await enrollment.consumeCode('child', 'hash-a', t0)).toBe(false);
    // Expired at exactly expiresAt.
    expect(await enrollment.consumeCode('parent', 'hash-a', t0 + 1000)).toBe(false);
    expect(await enrollment.getCode('parent')).toStrictEqual(code);
    expect(await enrollment.consumeCode('parent', 'hash-a', t0 + 999)).toBe(true);
  });

  it('a replaced code invalidates the previous one', async () => {
    const { enrollment } = fresh().store.identity;
    await enrollment.replaceCode(code);
    expect(await enrollment.consumeCode('parent', 'hash-a', t0)).toBe(true);
    await enrollment.replaceCode({ ...code, codeHash: 'hash-b', issuedAt: t0 + 5, expiresAt: t0 + 2000 });
    expect(await enrollment.consumeCode('parent', 'hash-a', t0 + 6)).toBe(false);
    expect(await enrollment.getCode('parent')).toStrictEqual({
      role: 'parent',
      codeHash: 'hash-b',
      issuedAt: t0 + 5,
      expiresAt: t0 + 2000,
    });
    expect(await enrollment.consumeCode('parent', 'hash-b', t0 + 6)).toBe(true);
  });

  it('counts failures per role at or after since, from every source or from one', async () => {
    const { enrollment } = fresh().store.identity;
    await enrollment.addFailure('child', 100, 'window-a');
    await enrollment.addFailure('child', 200, 'window-b');
    await enrollment.addFailure('child', 300, 'window-a');
    await enrollment.addFailure('parent', 300, 'window-a');
    expect(await enrollment.countFailures('child', 200)).toBe(2);
    expect(await enrollment.countFailures('child', 0)).toBe(3);
    expect(await enrollment.countFailures('child', 301)).toBe(0);
    expect(await enrollment.countFailures('parent', 0)).toBe(1);
    expect(await enrollment.countFailures('child', 0, 'window-a')).toBe(2);
    expect(await enrollment.countFailures('child', 150, 'window-a')).toBe(1);
    expect(await enrollment.countFailures('child', 0, 'window-c')).toBe(0);
  });
});

describe('passkeys', () => {
  it('adds once, reads back exactly, lists by role in creation order', async () => {
    const { passkeys } = fresh().store.identity;
    expect(await passkeys.add(passkey)).toBe(true);
    expect(await passkeys.add({ ...passkey, role: 'parent', counter: 0 })).toBe(false);
    expect(await passkeys.get(passkey.credentialId)).toStrictEqual(passkey);
    expect(await passkeys.get('unknown')).toBeUndefined();
    const second = { ...passkey, credentialId: 'cred-child-0', createdAt: t0 + 1, transports: [] };
    await passkeys.add(second);
    await passkeys.add({ ...passkey, credentialId: 'cred-parent', role: 'parent' });
    expect(await passkeys.listByRole('child')).toStrictEqual([passkey, second]);
    expect((await passkeys.listByRole('parent')).map((record) => record.credentialId)).toEqual(['cred-parent']);
  });

  it('moves the counter only from the expected value', async () => {
    const { passkeys } = fresh().store.identity;
    await passkeys.add(passkey);
    expect(await passkeys.updateCounter(passkey.credentialId, 3, 4)).toBe(true);
    // Stale: another assertion already moved it from 3.
    expect(await passkeys.updateCounter(passkey.credentialId, 3, 5)).toBe(false);
    expect((await passkeys.get(passkey.credentialId))?.counter).toBe(4);
    expect(await passkeys.updateCounter('unknown', 0, 1)).toBe(false);
  });
});

describe('sessions', () => {
  it('creates, gets and deletes', async () => {
    const { sessions } = fresh().store.identity;
    const session: SessionRecord = {
      tokenHash: 'token-hash',
      role: 'child',
      memberDid: 'did:key:z6MkChild',
      credentialId: 'cred-child-1',
      createdAt: t0,
      expiresAt: t0 + 3_600_000,
    };
    await sessions.create(session);
    expect(await sessions.get('token-hash')).toStrictEqual(session);
    expect(await sessions.get('other')).toBeUndefined();
    await sessions.delete('token-hash');
    expect(await sessions.get('token-hash')).toBeUndefined();
  });

  it('forgets sessions that expired by the time a new one is created', async () => {
    const { sessions } = fresh().store.identity;
    const base = { role: 'child', memberDid: 'did:key:z6MkChild', credentialId: 'c', createdAt: t0 } as const;
    await sessions.create({ ...base, tokenHash: 'old', expiresAt: t0 + 1_000 });
    await sessions.create({ ...base, tokenHash: 'live', expiresAt: t0 + 5_000 });
    await sessions.create({ ...base, tokenHash: 'new', createdAt: t0 + 1_000, expiresAt: t0 + 9_000 });
    expect(await sessions.get('old')).toBeUndefined();
    expect(await sessions.get('live')).toMatchObject({ tokenHash: 'live' });
  });
});

describe('ceremonies', () => {
  it('take returns the ceremony once', async () => {
    const { ceremonies } = fresh().store.identity;
    const registration: CeremonyRecord = {
      id: 'ceremony-1',
      kind: 'registration',
      challenge: 'challenge-1',
      role: 'parent',
      codeHash: 'hash-a',
      userHandle: 'aGFuZGxl',
      expiresAt: t0 + 60_000,
    };
    await ceremonies.put(registration, t0);
    expect(await ceremonies.take('ceremony-1')).toStrictEqual(registration);
    expect(await ceremonies.take('ceremony-1')).toBeUndefined();
  });

  it('forgets abandoned ceremonies that expired by the time a new one is put', async () => {
    const { ceremonies } = fresh().store.identity;
    await ceremonies.put({ id: 'abandoned', kind: 'sign-in', challenge: 'a', expiresAt: t0 + 1_000 }, t0);
    await ceremonies.put({ id: 'live', kind: 'sign-in', challenge: 'b', expiresAt: t0 + 5_000 }, t0);
    await ceremonies.put({ id: 'new', kind: 'sign-in', challenge: 'c', expiresAt: t0 + 9_000 }, t0 + 1_000);
    expect(await ceremonies.take('abandoned')).toBeUndefined();
    expect(await ceremonies.take('live')).toMatchObject({ id: 'live' });
  });

  it('omits optional fields that were not given', async () => {
    const { ceremonies } = fresh().store.identity;
    const signIn: CeremonyRecord = { id: 'ceremony-2', kind: 'sign-in', challenge: 'c', expiresAt: t0 };
    const approvalCeremony: CeremonyRecord = {
      id: 'ceremony-3',
      kind: 'approval',
      challenge: 'd',
      role: 'child',
      approvalId: 'approval-1',
      expiresAt: t0,
    };
    await ceremonies.put(signIn, t0 - 1);
    await ceremonies.put(approvalCeremony, t0 - 1);
    expect(await ceremonies.take('ceremony-2')).toStrictEqual(signIn);
    expect(await ceremonies.take('ceremony-3')).toStrictEqual(approvalCeremony);
  });
});

describe('approvals', () => {
  it('creates once per invoice: a second create returns the first request with created false', async () => {
    const { approvals } = fresh().store.identity;
    expect(await approvals.create(approval)).toStrictEqual({ record: approval, created: true });
    const again = await approvals.create({ ...approval, approvalId: 'approval-other', totalCents: 1 });
    expect(again).toStrictEqual({ record: approval, created: false });
    expect(await approvals.get('approval-other')).toBeUndefined();
    expect(await approvals.get('approval-1')).toStrictEqual(approval);
    expect(await approvals.getByInvoice('urn:uuid:invoice-1')).toStrictEqual(approval);
    expect(await approvals.getByInvoice('urn:uuid:unknown')).toBeUndefined();
  });

  it('refuses an approval id already used by another invoice', async () => {
    const { approvals } = fresh().store.identity;
    await approvals.create(approval);
    await expect(approvals.create({ ...approval, invoiceId: 'urn:uuid:other' })).rejects.toMatchObject({
      name: 'IdentityError',
      code: 'conflict',
    });
  });

  it('adds one approval per role while pending, and none after', async () => {
    const { approvals } = fresh().store.identity;
    await approvals.create(approval);
    expect(await approvals.addApproval('approval-1', 'child', 'vc-child', t0 + 1)).toBe(true);
    expect(await approvals.addApproval('approval-1', 'child', 'vc-child-2', t0 + 2)).toBe(false);
    expect(await approvals.get('approval-1')).toStrictEqual({
      ...approval,
      approvals: { child: 'vc-child' },
      updatedAt: t0 + 1,
    });
    expect(await approvals.addApproval('approval-1', 'parent', 'vc-parent', t0 + 3)).toBe(true);
    expect((await approvals.get('approval-1'))?.approvals).toStrictEqual({ child: 'vc-child', parent: 'vc-parent' });
    expect(await approvals.addApproval('unknown', 'child', 'vc', t0)).toBe(false);

    await approvals.create(approvalFor(2));
    expect(await approvals.transition('approval-2', { from: ['pending'], to: 'declined', now: t0 + 4 })).toBe(true);
    expect(await approvals.addApproval('approval-2', 'child', 'vc-child', t0 + 5)).toBe(false);
    expect((await approvals.get('approval-2'))?.approvals).toStrictEqual({});
  });

  it('transitions only from a listed status, applying the patch and updatedAt', async () => {
    const { approvals } = fresh().store.identity;
    await approvals.create(approval);
    expect(await approvals.transition('approval-1', { from: ['approved'], to: 'settled', now: t0 + 1 })).toBe(false);
    expect(await approvals.get('approval-1')).toStrictEqual(approval);
    expect(await approvals.transition('approval-1', { from: [], to: 'approved', now: t0 + 1 })).toBe(false);

    expect(await approvals.transition('approval-1', { from: ['pending'], to: 'approved', now: t0 + 2 })).toBe(true);
    // Two racing deciders: the second sees 'approved', not 'pending'.
    expect(
      await approvals.transition('approval-1', {
        from: ['pending'],
        to: 'declined',
        now: t0 + 3,
        patch: { reason: 'declined' },
      }),
    ).toBe(false);
    expect(
      await approvals.transition('approval-1', {
        from: ['approved'],
        to: 'settled',
        now: t0 + 4,
        patch: { receipt: 'vc-receipt' },
      }),
    ).toBe(true);
    expect(
      await approvals.transition('approval-1', {
        from: ['settled'],
        to: 'fulfilled',
        now: t0 + 5,
        patch: { commitment: 'vc-commitment' },
      }),
    ).toBe(true);
    expect(await approvals.get('approval-1')).toStrictEqual({
      ...approval,
      status: 'fulfilled',
      receipt: 'vc-receipt',
      commitment: 'vc-commitment',
      updatedAt: t0 + 5,
    });
    expect(await approvals.transition('unknown', { from: ['pending'], to: 'expired', now: t0 })).toBe(false);
  });

  it('stores a reason given with a transition', async () => {
    const { approvals } = fresh().store.identity;
    await approvals.create(approval);
    await approvals.transition('approval-1', {
      from: ['pending', 'approved'],
      to: 'expired',
      now: t0 + 9,
      patch: { reason: 'the invoice expired' },
    });
    expect(await approvals.get('approval-1')).toStrictEqual({
      ...approval,
      status: 'expired',
      reason: 'the invoice expired',
      updatedAt: t0 + 9,
    });
  });

  it('lists pending oldest first and recent newest first, at most limit', async () => {
    const { approvals } = fresh().store.identity;
    // Inserted out of time order, so insertion order alone would give the wrong answer.
    await approvals.create(approvalFor(3));
    await approvals.create(approvalFor(1));
    await approvals.create(approvalFor(4));
    await approvals.create(approvalFor(2));
    await approvals.transition('approval-2', { from: ['pending'], to: 'declined', now: t0 + 10 });
    expect((await approvals.listPending()).map((record) => record.approvalId)).toEqual([
      'approval-1',
      'approval-3',
      'approval-4',
    ]);
    expect((await approvals.listRecent(3)).map((record) => record.approvalId)).toEqual([
      'approval-4',
      'approval-3',
      'approval-2',
    ]);
    expect(await approvals.listRecent(0)).toEqual([]);
    await expect(approvals.listRecent(-1)).rejects.toMatchObject({ code: 'bad-request' });
  });
});

describe('merchants', () => {
  const merchant: MerchantRecord = {
    did: 'did:web:pizza.example',
    name: 'Pizza',
    publicKeyJwk: { kty: 'OKP', crv: 'Ed25519', x: 'first-key' },
    trustedAt: t0,
  };

  it('pins a merchant once: re-adding the DID with another key is false and keeps the first key', async () => {
    const { merchants } = fresh().store.identity;
    expect(await merchants.add(merchant)).toBe(true);
    expect(
      await merchants.add({ ...merchant, name: 'Evil', publicKeyJwk: { kty: 'OKP', crv: 'Ed25519', x: 'second' } }),
    ).toBe(false);
    expect(await merchants.get(merchant.did)).toStrictEqual(merchant);
  });

  it('lists and removes', async () => {
    const { merchants } = fresh().store.identity;
    const other = { ...merchant, did: 'did:key:z6MkOther', trustedAt: t0 + 1 };
    await merchants.add(other);
    await merchants.add(merchant);
    expect(await merchants.list()).toStrictEqual([merchant, other]);
    expect(await merchants.remove(merchant.did)).toBe(true);
    expect(await merchants.remove(merchant.did)).toBe(false);
    expect(await merchants.get(merchant.did)).toBeUndefined();
    expect(await merchants.list()).toStrictEqual([other]);
  });
});

describe('tool pins', () => {
  it('are kept in the household file: a reopened store still knows the server and its pins', async () => {
    const { store, path } = fresh();
    const pin = { server: 'pizza', tool: 'get_menu', hash: 'a'.repeat(64), source: 'pins-file', pinnedAt: 1 } as const;
    expect(await store.pins.pinFirst('pizza', [pin])).toBe(true);
    store.close();
    stores.splice(stores.indexOf(store), 1);
    const again = reopen(path);
    const read = await again.pins.read('pizza');
    expect(read.known).toBe(true);
    expect(read.pins.get('get_menu')?.hash).toBe(pin.hash);
    // Known now: a second first pinning (another process, a pins file) changes nothing.
    expect(await again.pins.pinFirst('pizza', [])).toBe(false);
  });
});
