/**
 * One contract for every identity store (SPEC §5, §11; issue 28), run on SQLite and PostgreSQL.
 * The single-instance part is what any implementation shows; the shared part opens two handles
 * on one location (two SQLite connections, two `pg` pools) and races them, which SQLite's single
 * writer never exercises but PostgreSQL's `READ COMMITTED` does: every "once" must still be once.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { ApprovalRecord, CeremonyRecord, IdentityStore, PasskeyRecord, SessionRecord } from '../../identity/index';
import { type HouseholdStoreHandle as Handle, householdStoreOpeners } from '../support/household-store-openers';
import { postgresAvailable, postgresUnavailable } from '../support/postgres';

const { implementations, cleanUp } = householdStoreOpeners();
afterEach(cleanUp);

it.skipIf(postgresAvailable)(`the PostgreSQL identity store is skipped: ${postgresUnavailable}`, () => {});

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

const code = { role: 'child', codeHash: 'hash-a', issuedAt: t0, expiresAt: t0 + 1_000 } as const;

/** `count` calls of `run`, alternating between the handles, all started at once. */
function race<T>(handles: readonly Handle[], count: number, run: (store: IdentityStore, index: number) => Promise<T>) {
  return Promise.all(
    Array.from({ length: count }, (_, index) => run((handles[index % handles.length] as Handle).identity, index)),
  );
}

describe.each(Object.entries(implementations))('the %s identity store', (_name, kind) => {
  const handle = async (location?: string): Promise<Handle> => kind.open(location ?? (await kind.location()));
  const store = async () => (await handle()).identity;
  /** Two independent handles on one fresh location. */
  const shared = async (): Promise<Handle[]> => {
    const location = await kind.location();
    return [await handle(location), await handle(location)];
  };

  describe('single instance', () => {
    it('records: puts, replaces, gets, lists by kind in id order and deletes', async () => {
      const { records } = await store();
      await records.put('key', 'b', '{"v":1}');
      await records.put('key', 'a', '{"v":2}');
      await records.put('key', 'b', '{"v":3}');
      await records.put('did', 'did:key:z', '{}');
      expect(await records.get('key', 'b')).toBe('{"v":3}');
      expect(await records.get('key', 'missing')).toBeUndefined();
      expect(await records.list('key')).toStrictEqual([
        { id: 'a', value: '{"v":2}' },
        { id: 'b', value: '{"v":3}' },
      ]);
      expect(await records.delete('key', 'a')).toBe(true);
      expect(await records.delete('key', 'a')).toBe(false);
      expect(await records.list('key')).toStrictEqual([{ id: 'b', value: '{"v":3}' }]);
    });

    it('records: insert is first-writer-wins', async () => {
      const { records } = await store();
      expect(await records.insert('household', 'household', 'first')).toBe(true);
      expect(await records.insert('household', 'household', 'second')).toBe(false);
      expect(await records.get('household', 'household')).toBe('first');
    });

    it('records: exclusive returns what the work returns, rethrows its error, and is free again after either', async () => {
      const { records } = await store();
      expect(await records.exclusive('setup', async () => 42)).toBe(42);
      await expect(
        records.exclusive('setup', async () => {
          throw new Error('setup broke');
        }),
      ).rejects.toThrow('setup broke');
      expect(await records.exclusive('setup', async () => 'again')).toBe('again');
    });

    it('records: runs twenty exclusive holders of one handle at once, more than a pool has connections, each in turn', async () => {
      const { records } = await store();
      let inside = 0;
      let most = 0;
      await Promise.all(
        Array.from({ length: 20 }, (_, index) =>
          records.exclusive('setup', async () => {
            inside += 1;
            most = Math.max(most, inside);
            await records.put('did', `holder-${index}`, 'x');
            inside -= 1;
          }),
        ),
      );
      expect(most).toBe(1);
      expect(await records.list('did')).toHaveLength(20);
    });

    it('enrollment: stores a code, consumes it once, refuses a wrong hash, another role and an expired code', async () => {
      const { enrollment } = await store();
      await enrollment.replaceCode(code);
      expect(await enrollment.getCode('child')).toStrictEqual(code);
      expect(await enrollment.getCode('parent')).toBeUndefined();
      expect(await enrollment.consumeCode('child', 'hash-b', t0 + 1)).toBe(false);
      expect(await enrollment.consumeCode('parent', 'hash-a', t0 + 1)).toBe(false);
      expect(await enrollment.consumeCode('child', 'hash-a', t0 + 1_000)).toBe(false);
      expect(await enrollment.consumeCode('child', 'hash-a', t0 + 1)).toBe(true);
      expect(await enrollment.consumeCode('child', 'hash-a', t0 + 2)).toBe(false);
      expect(await enrollment.getCode('child')).toStrictEqual({ ...code, usedAt: t0 + 1 });
      await enrollment.replaceCode({ ...code, codeHash: 'hash-b', issuedAt: t0 + 5, expiresAt: t0 + 2_000 });
      expect(await enrollment.consumeCode('child', 'hash-a', t0 + 6)).toBe(false);
      expect(await enrollment.consumeCode('child', 'hash-b', t0 + 6)).toBe(true);
    });

    it('enrollment: issueCode keeps a live code and replaces only a used or expired one', async () => {
      const { enrollment } = await store();
      expect(await enrollment.issueCode(code, t0)).toBe(true);
      expect(await enrollment.issueCode({ ...code, codeHash: 'hash-b' }, t0 + 1)).toBe(false);
      expect((await enrollment.getCode('child'))?.codeHash).toBe('hash-a');
      // Expired at its expiresAt: replaced.
      expect(await enrollment.issueCode({ ...code, codeHash: 'hash-c', expiresAt: t0 + 5_000 }, t0 + 1_000)).toBe(true);
      expect(await enrollment.getCode('child')).toStrictEqual({ ...code, codeHash: 'hash-c', expiresAt: t0 + 5_000 });
      // Used: replaced.
      expect(await enrollment.consumeCode('child', 'hash-c', t0 + 1_001)).toBe(true);
      expect(await enrollment.issueCode({ ...code, codeHash: 'hash-d', expiresAt: t0 + 9_000 }, t0 + 1_002)).toBe(true);
      expect(await enrollment.getCode('child')).toStrictEqual({ ...code, codeHash: 'hash-d', expiresAt: t0 + 9_000 });
      // Per role.
      expect(await enrollment.issueCode({ ...code, role: 'parent', codeHash: 'hash-p' }, t0)).toBe(true);
    });

    it('enrollment: counts failures per role at or after since, from every source or from one', async () => {
      const { enrollment } = await store();
      await enrollment.addFailure('child', t0, 'window-a');
      await enrollment.addFailure('child', t0 + 10, 'window-b');
      await enrollment.addFailure('child', t0 + 20, 'window-a');
      await enrollment.addFailure('parent', t0 + 20, 'window-a');
      expect(await enrollment.countFailures('child', t0)).toBe(3);
      expect(await enrollment.countFailures('child', t0 + 10)).toBe(2);
      expect(await enrollment.countFailures('child', t0, 'window-a')).toBe(2);
      expect(await enrollment.countFailures('child', t0 + 1, 'window-a')).toBe(1);
      expect(await enrollment.countFailures('parent', t0)).toBe(1);
    });

    it('passkeys: adds once, reads back exactly, lists by role in creation order, moves the counter only from the expected value', async () => {
      const { passkeys } = await store();
      expect(await passkeys.add(passkey)).toBe(true);
      expect(await passkeys.add({ ...passkey, role: 'parent', counter: 0 })).toBe(false);
      expect(await passkeys.get(passkey.credentialId)).toStrictEqual(passkey);
      expect(await passkeys.get('unknown')).toBeUndefined();
      const second = { ...passkey, credentialId: 'cred-child-0', createdAt: t0 + 1, transports: [] };
      const third = { ...passkey, credentialId: 'cred-child-00', createdAt: t0 + 1 };
      await passkeys.add(second);
      await passkeys.add(third);
      await passkeys.add({ ...passkey, credentialId: 'cred-parent', role: 'parent' });
      expect(await passkeys.listByRole('child')).toStrictEqual([passkey, second, third]);
      expect((await passkeys.listByRole('parent')).map((record) => record.credentialId)).toEqual(['cred-parent']);
      expect(await passkeys.updateCounter(passkey.credentialId, 3, 4)).toBe(true);
      expect(await passkeys.updateCounter(passkey.credentialId, 3, 5)).toBe(false);
      expect((await passkeys.get(passkey.credentialId))?.counter).toBe(4);
      expect(await passkeys.updateCounter('unknown', 0, 1)).toBe(false);
    });

    it('sessions: creates, gets and deletes, and forgets those expired by a new one', async () => {
      const { sessions } = await store();
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
      const base = { role: 'child', memberDid: 'did:key:z6MkChild', credentialId: 'c', createdAt: t0 } as const;
      await sessions.create({ ...base, tokenHash: 'old', expiresAt: t0 + 1_000 });
      await sessions.create({ ...base, tokenHash: 'live', expiresAt: t0 + 5_000 });
      await sessions.create({ ...base, tokenHash: 'new', createdAt: t0 + 1_000, expiresAt: t0 + 9_000 });
      expect(await sessions.get('old')).toBeUndefined();
      expect(await sessions.get('live')).toMatchObject({ tokenHash: 'live' });
    });

    it('sessions: a token hash is unique: creating it again fails and the first session stays', async () => {
      const { sessions } = await store();
      const session: SessionRecord = {
        tokenHash: 'token-hash',
        role: 'child',
        memberDid: 'did:key:z6MkChild',
        credentialId: 'cred-child-1',
        createdAt: t0,
        expiresAt: t0 + 3_600_000,
      };
      await sessions.create(session);
      await expect(sessions.create({ ...session, role: 'parent', memberDid: 'did:key:p' })).rejects.toMatchObject({
        code: 'store-failed',
      });
      expect(await sessions.get('token-hash')).toStrictEqual(session);
    });

    it('ceremonies: a ceremony put again under its id replaces the first, and is taken once', async () => {
      const { ceremonies } = await store();
      await ceremonies.put({ id: 'c', kind: 'sign-in', challenge: 'first', expiresAt: t0 + 60_000 }, t0);
      await ceremonies.put(
        { id: 'c', kind: 'approval', challenge: 'second', role: 'child', expiresAt: t0 + 60_000 },
        t0,
      );
      expect(await ceremonies.take('c')).toStrictEqual({
        id: 'c',
        kind: 'approval',
        challenge: 'second',
        role: 'child',
        expiresAt: t0 + 60_000,
      });
      expect(await ceremonies.take('c')).toBeUndefined();
    });

    it('refuses a kind, a role or a status outside its closed set, and stores nothing', async () => {
      const { records, enrollment, approvals, passkeys, sessions, ceremonies } = await store();
      await expect(records.put('secret' as never, 'a', 'v')).rejects.toMatchObject({ code: 'store-failed' });
      expect(await records.get('secret' as never, 'a')).toBeUndefined();
      await expect(enrollment.replaceCode({ ...code, role: 'admin' as never })).rejects.toMatchObject({
        code: 'store-failed',
      });
      await approvals.create(approval);
      await expect(
        approvals.transition('approval-1', { from: ['pending'], to: 'paid' as never, now: t0 + 1 }),
      ).rejects.toMatchObject({ code: 'store-failed' });
      expect((await approvals.get('approval-1'))?.status).toBe('pending');
      // Each closed column of the other tables, reached through the store's own calls.
      await expect(passkeys.add({ ...passkey, role: 'admin' as never })).rejects.toMatchObject({
        code: 'store-failed',
      });
      expect(await passkeys.get(passkey.credentialId)).toBeUndefined();
      const session = { tokenHash: 't', memberDid: 'did:key:m', credentialId: 'c', createdAt: t0, expiresAt: t0 + 1 };
      await expect(sessions.create({ ...session, role: 'admin' as never })).rejects.toMatchObject({
        code: 'store-failed',
      });
      expect(await sessions.get('t')).toBeUndefined();
      const ceremony = { id: 'c', challenge: 'x', expiresAt: t0 + 60_000 };
      await expect(ceremonies.put({ ...ceremony, kind: 'payment' as never }, t0)).rejects.toMatchObject({
        code: 'store-failed',
      });
      await expect(ceremonies.put({ ...ceremony, kind: 'approval', role: 'admin' as never }, t0)).rejects.toMatchObject(
        { code: 'store-failed' },
      );
      expect(await ceremonies.take('c')).toBeUndefined();
      await expect(enrollment.addFailure('admin' as never, t0, 'window')).rejects.toMatchObject({
        code: 'store-failed',
      });
      expect(await enrollment.countFailures('admin' as never, 0)).toBe(0);
    });

    it('ceremonies: take returns a ceremony once, exactly as put, and put forgets expired ones', async () => {
      const { ceremonies } = await store();
      const registration: CeremonyRecord = {
        id: 'ceremony-1',
        kind: 'registration',
        challenge: 'challenge-1',
        role: 'parent',
        codeHash: 'hash-a',
        userHandle: 'aGFuZGxl',
        expiresAt: t0 + 60_000,
      };
      const signIn: CeremonyRecord = { id: 'ceremony-2', kind: 'sign-in', challenge: 'c', expiresAt: t0 + 60_000 };
      await ceremonies.put(registration, t0);
      await ceremonies.put(signIn, t0);
      expect(await ceremonies.take('ceremony-1')).toStrictEqual(registration);
      expect(await ceremonies.take('ceremony-1')).toBeUndefined();
      expect(await ceremonies.take('ceremony-2')).toStrictEqual(signIn);
      await ceremonies.put({ id: 'abandoned', kind: 'sign-in', challenge: 'a', expiresAt: t0 + 1_000 }, t0);
      await ceremonies.put({ id: 'live', kind: 'sign-in', challenge: 'b', expiresAt: t0 + 5_000 }, t0);
      await ceremonies.put({ id: 'new', kind: 'sign-in', challenge: 'c', expiresAt: t0 + 9_000 }, t0 + 1_000);
      expect(await ceremonies.take('abandoned')).toBeUndefined();
      expect(await ceremonies.take('live')).toMatchObject({ id: 'live' });
    });

    it('approvals: one request per invoice, an approval id of another invoice refused', async () => {
      const { approvals } = await store();
      expect(await approvals.create(approval)).toStrictEqual({ record: approval, created: true });
      const again = await approvals.create({ ...approval, approvalId: 'approval-other', totalCents: 1 });
      expect(again).toStrictEqual({ record: approval, created: false });
      expect(await approvals.get('approval-other')).toBeUndefined();
      expect(await approvals.getByInvoice('urn:uuid:invoice-1')).toStrictEqual(approval);
      expect(await approvals.getByInvoice('urn:uuid:unknown')).toBeUndefined();
      await expect(approvals.create({ ...approval, invoiceId: 'urn:uuid:other' })).rejects.toMatchObject({
        name: 'IdentityError',
        code: 'conflict',
      });
    });

    it('approvals: one approval per role while pending; transitions only from a listed status, the patch by the winner', async () => {
      const { approvals } = await store();
      await approvals.create(approval);
      expect(await approvals.addApproval('approval-1', 'child', 'vc-child', t0 + 1)).toBe(true);
      expect(await approvals.addApproval('approval-1', 'child', 'vc-child-2', t0 + 2)).toBe(false);
      expect(await approvals.get('approval-1')).toStrictEqual({
        ...approval,
        approvals: { child: 'vc-child' },
        updatedAt: t0 + 1,
      });
      expect(await approvals.addApproval('approval-1', 'parent', 'vc-parent', t0 + 3)).toBe(true);
      expect(await approvals.addApproval('unknown', 'child', 'vc', t0)).toBe(false);
      expect(await approvals.transition('approval-1', { from: ['approved'], to: 'settled', now: t0 + 4 })).toBe(false);
      expect(await approvals.transition('approval-1', { from: [], to: 'approved', now: t0 + 4 })).toBe(false);
      expect(await approvals.transition('approval-1', { from: ['pending'], to: 'approved', now: t0 + 5 })).toBe(true);
      expect(await approvals.addApproval('approval-1', 'child', 'vc', t0 + 6)).toBe(false);
      // A role that has not approved yet cannot approve a request that left pending (declined here).
      const declined = approvalFor(2);
      await approvals.create(declined);
      expect(await approvals.transition('approval-2', { from: ['pending'], to: 'declined', now: t0 + 6 })).toBe(true);
      expect(await approvals.addApproval('approval-2', 'parent', 'vc-parent', t0 + 7)).toBe(false);
      expect((await approvals.get('approval-2'))?.approvals).toStrictEqual({});
      expect(
        await approvals.transition('approval-1', {
          from: ['approved'],
          to: 'settled',
          now: t0 + 7,
          patch: { receipt: 'eyJ.receipt' },
        }),
      ).toBe(true);
      expect(
        await approvals.transition('approval-1', {
          from: ['settled'],
          to: 'fulfilled',
          now: t0 + 8,
          patch: { commitment: 'eyJ.commitment', reason: 'delivered' },
        }),
      ).toBe(true);
      expect(await approvals.get('approval-1')).toStrictEqual({
        ...approval,
        approvals: { child: 'vc-child', parent: 'vc-parent' },
        status: 'fulfilled',
        receipt: 'eyJ.receipt',
        commitment: 'eyJ.commitment',
        reason: 'delivered',
        updatedAt: t0 + 8,
      });
    });

    it('approvals: hands an order approved on the child alone to the parent once, keeping the child’s approval; nothing else', async () => {
      const { approvals } = await store();
      const handover = {
        cause: 'budget-spent',
        allowanceId: 'urn:uuid:allowance-1',
        period: 'day',
        at: t0 + 9,
      } as const;
      const childOnly = (index: number) => approvalFor(index, { requiredRoles: ['child'] });
      // Approved on the child's approval alone: handed over once, pending again, asking both.
      await approvals.create(childOnly(1));
      await approvals.addApproval('approval-1', 'child', 'vc-child', t0 + 2);
      await approvals.transition('approval-1', { from: ['pending'], to: 'approved', now: t0 + 3 });
      expect(await approvals.handToParent('approval-1', handover)).toBe(true);
      expect(await approvals.get('approval-1')).toStrictEqual({
        ...childOnly(1),
        requiredRoles: ['child', 'parent'],
        approvals: { child: 'vc-child' },
        status: 'pending',
        handover,
        updatedAt: t0 + 9,
      });
      expect(await approvals.handToParent('approval-1', { ...handover, cause: 'revoked', at: t0 + 10 })).toBe(false);
      expect((await approvals.listPending()).map((record) => record.approvalId)).toEqual(['approval-1']);
      // The parent approves it; it is approved again, and never handed over a second time.
      expect(await approvals.addApproval('approval-1', 'parent', 'vc-parent', t0 + 11)).toBe(true);
      expect(await approvals.transition('approval-1', { from: ['pending'], to: 'approved', now: t0 + 12 })).toBe(true);
      expect(await approvals.handToParent('approval-1', handover)).toBe(false);
      expect(await approvals.get('approval-1')).toMatchObject({ status: 'approved', handover });
      // A hand-over without a period keeps none.
      await approvals.create(childOnly(7));
      await approvals.addApproval('approval-7', 'child', 'vc-child', t0 + 2);
      await approvals.transition('approval-7', { from: ['pending'], to: 'approved', now: t0 + 3 });
      const { period: _period, ...withoutPeriod } = handover;
      expect(await approvals.handToParent('approval-7', withoutPeriod)).toBe(true);
      expect((await approvals.get('approval-7'))?.handover).toStrictEqual(withoutPeriod);
      // Not handed over: still pending, declined, settled, one that asked both roles, an unknown id.
      await approvals.create(childOnly(2));
      expect(await approvals.handToParent('approval-2', handover)).toBe(false);
      await approvals.transition('approval-2', { from: ['pending'], to: 'declined', now: t0 + 3 });
      expect(await approvals.handToParent('approval-2', handover)).toBe(false);
      await approvals.create(childOnly(3));
      await approvals.addApproval('approval-3', 'child', 'vc-child', t0 + 2);
      await approvals.transition('approval-3', { from: ['pending'], to: 'approved', now: t0 + 3 });
      await approvals.transition('approval-3', {
        from: ['approved'],
        to: 'settled',
        now: t0 + 4,
        patch: { receipt: 'r' },
      });
      expect(await approvals.handToParent('approval-3', handover)).toBe(false);
      await approvals.create(approvalFor(4));
      await approvals.addApproval('approval-4', 'child', 'vc-child', t0 + 2);
      await approvals.addApproval('approval-4', 'parent', 'vc-parent', t0 + 2);
      await approvals.transition('approval-4', { from: ['pending'], to: 'approved', now: t0 + 3 });
      expect(await approvals.handToParent('approval-4', handover)).toBe(false);
      expect(await approvals.handToParent('unknown', handover)).toBe(false);
      for (const id of ['approval-2', 'approval-3', 'approval-4'])
        expect((await approvals.get(id))?.handover).toBeUndefined();
      expect((await approvals.get('approval-3'))?.status).toBe('settled');
      expect((await approvals.get('approval-4'))?.status).toBe('approved');
    });

    it('approvals: lists pending oldest first and recent newest first, at most limit; a negative limit is refused', async () => {
      const { approvals } = await store();
      for (const index of [1, 2, 3, 4]) await approvals.create(approvalFor(index));
      // Two created in the same millisecond keep the order they were created in.
      await approvals.create(approvalFor(5, { createdAt: t0 + 4 }));
      await approvals.transition('approval-2', { from: ['pending'], to: 'declined', now: t0 + 9 });
      expect((await approvals.listPending()).map((record) => record.approvalId)).toEqual([
        'approval-1',
        'approval-3',
        'approval-4',
        'approval-5',
      ]);
      expect((await approvals.listRecent(3)).map((record) => record.approvalId)).toEqual([
        'approval-5',
        'approval-4',
        'approval-3',
      ]);
      expect(await approvals.listRecent(0)).toEqual([]);
      await expect(approvals.listRecent(-1)).rejects.toMatchObject({ code: 'bad-request' });
    });

    it('merchants: pins once (a changed key is never overwritten), lists in trust order, removes', async () => {
      const { merchants } = await store();
      const shop = { did: 'did:key:z6MkShop', name: 'Pizza', publicKeyJwk: { kty: 'OKP', x: 'a' }, trustedAt: t0 };
      expect(await merchants.add(shop)).toBe(true);
      expect(await merchants.add({ ...shop, publicKeyJwk: { kty: 'OKP', x: 'b' } })).toBe(false);
      expect(await merchants.get(shop.did)).toStrictEqual(shop);
      await merchants.add({ ...shop, did: 'did:key:z6MkOther', trustedAt: t0 });
      expect((await merchants.list()).map((record) => record.did)).toEqual([shop.did, 'did:key:z6MkOther']);
      expect(await merchants.remove(shop.did)).toBe(true);
      expect(await merchants.remove(shop.did)).toBe(false);
      expect(await merchants.get(shop.did)).toBeUndefined();
    });

    it('profile: names by role, set and replaced, in role order; the zone set once by init, replaced by set', async () => {
      const { profile } = await store();
      expect(await profile.names()).toEqual([]);
      expect(await profile.timeZone()).toBeUndefined();
      await profile.setName({ role: 'parent', name: 'Alex', setAt: t0 });
      await profile.setName({ role: 'child', name: 'Zoé 山田', setAt: t0 + 1 });
      await profile.setName({ role: 'parent', name: 'Alexandra', setAt: t0 + 2 });
      expect(await profile.names()).toStrictEqual([
        { role: 'child', name: 'Zoé 山田', setAt: t0 + 1 },
        { role: 'parent', name: 'Alexandra', setAt: t0 + 2 },
      ]);
      await expect(profile.setName({ role: 'admin' as never, name: 'Eve', setAt: t0 })).rejects.toMatchObject({
        code: 'store-failed',
      });
      expect(await profile.initTimeZone({ timeZone: 'Europe/Paris', setAt: t0 })).toBe(true);
      expect(await profile.initTimeZone({ timeZone: 'UTC', setAt: t0 + 1 })).toBe(false);
      expect(await profile.timeZone()).toStrictEqual({ timeZone: 'Europe/Paris', setAt: t0 });
      await profile.setTimeZone({ timeZone: 'America/Los_Angeles', setAt: t0 + 2 });
      expect(await profile.timeZone()).toStrictEqual({ timeZone: 'America/Los_Angeles', setAt: t0 + 2 });
      expect(await profile.initTimeZone({ timeZone: 'UTC', setAt: t0 + 3 })).toBe(false);
      expect((await profile.timeZone())?.timeZone).toBe('America/Los_Angeles');
    });

    it('wraps a driver fault in IdentityError store-failed with the cause kept', async () => {
      const location = await kind.location();
      const broken = await kind.open(location);
      await broken.close();
      const failure = await broken.identity.records.get('key', 'a').catch((error: unknown) => error);
      expect(failure).toMatchObject({ name: 'IdentityError', code: 'store-failed' });
      expect((failure as Error).cause).toBeDefined();
    });
  });

  describe('shared: two handles on one store', () => {
    it('sees what the other wrote at once, a deleted session (a sign-out) included', async () => {
      const [a, b] = (await shared()) as [Handle, Handle];
      const session: SessionRecord = {
        tokenHash: 'token',
        role: 'parent',
        memberDid: 'did:key:p',
        credentialId: 'c',
        createdAt: t0,
        expiresAt: t0 + 60_000,
      };
      await a.identity.sessions.create(session);
      expect(await b.identity.sessions.get('token')).toStrictEqual(session);
      await b.identity.sessions.delete('token');
      expect(await a.identity.sessions.get('token')).toBeUndefined();
    });

    it('lets one of twenty concurrent first inserts of a record win, and keeps its value', async () => {
      const handles = await shared();
      const outcomes = await race(handles, 20, (store, index) =>
        store.records.insert('household', 'household', `v${index}`),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      expect(await handles[1]?.identity.records.get('household', 'household')).toBe(`v${outcomes.indexOf(true)}`);
    });

    it('runs exclusive work one holder at a time across both handles: no lost update of a read-modify-write', async () => {
      const handles = await shared();
      let inside = 0;
      let most = 0;
      await race(handles, 10, (store) =>
        store.records.exclusive('counter', async () => {
          inside += 1;
          most = Math.max(most, inside);
          const value = Number((await store.records.get('did', 'counter')) ?? '0');
          await store.records.put('did', 'counter', String(value + 1));
          inside -= 1;
        }),
      );
      expect(most).toBe(1);
      expect(await handles[0]?.identity.records.get('did', 'counter')).toBe('10');
    });

    it('consumes one code once among twenty concurrent uses through both handles', async () => {
      const handles = await shared();
      await handles[0]?.identity.enrollment.replaceCode(code);
      const outcomes = await race(handles, 20, (store) => store.enrollment.consumeCode('child', 'hash-a', t0 + 1));
      expect(outcomes.filter(Boolean)).toHaveLength(1);
    });

    it('issues one code among twenty concurrent issues for a role with none live, and keeps the winner', async () => {
      const handles = await shared();
      const outcomes = await race(handles, 20, (store, index) =>
        store.enrollment.issueCode({ ...code, codeHash: `hash-${index}` }, t0),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      expect((await handles[1]?.identity.enrollment.getCode('child'))?.codeHash).toBe(`hash-${outcomes.indexOf(true)}`);
    });

    it('moves a sign counter once among twenty concurrent assertions that read the same value', async () => {
      const handles = await shared();
      await handles[0]?.identity.passkeys.add(passkey);
      const outcomes = await race(handles, 20, (store, index) =>
        store.passkeys.updateCounter(passkey.credentialId, 3, 4 + index),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      expect((await handles[1]?.identity.passkeys.get(passkey.credentialId))?.counter).toBe(4 + outcomes.indexOf(true));
    });

    it('enrols a credential id once among ten concurrent adds', async () => {
      const handles = await shared();
      const outcomes = await race(handles, 10, (store, index) => store.passkeys.add({ ...passkey, counter: index }));
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      expect((await handles[0]?.identity.passkeys.get(passkey.credentialId))?.counter).toBe(outcomes.indexOf(true));
    });

    it('hands a challenge out once among twenty concurrent takes', async () => {
      const handles = await shared();
      await handles[0]?.identity.ceremonies.put(
        { id: 'c', kind: 'sign-in', challenge: 'x', expiresAt: t0 + 60_000 },
        t0,
      );
      const taken = await race(handles, 20, (store) => store.ceremonies.take('c'));
      expect(taken.filter((ceremony) => ceremony !== undefined)).toHaveLength(1);
    });

    it('creates one request among ten concurrent creates of one invoice, and every caller gets that one', async () => {
      const handles = await shared();
      const outcomes = await race(handles, 10, (store, index) =>
        store.approvals.create({ ...approval, approvalId: `approval-${index}` }),
      );
      expect(outcomes.filter((outcome) => outcome.created)).toHaveLength(1);
      const winner = outcomes.find((outcome) => outcome.created)?.record.approvalId;
      expect(new Set(outcomes.map((outcome) => outcome.record.approvalId))).toEqual(new Set([winner]));
    });

    it("records one approval per role among concurrent approvals, and both roles' when they race each other", async () => {
      const handles = await shared();
      await handles[0]?.identity.approvals.create(approval);
      const outcomes = await race(handles, 20, (store, index) =>
        store.approvals.addApproval('approval-1', index % 4 < 2 ? 'child' : 'parent', `vc-${index}`, t0 + index),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(2);
      const stored = await handles[1]?.identity.approvals.get('approval-1');
      expect(Object.keys(stored?.approvals ?? {}).sort()).toEqual(['child', 'parent']);
      const winners = outcomes.flatMap((won, index) => (won ? [`vc-${index}`] : []));
      expect(Object.values(stored?.approvals ?? {}).sort()).toEqual(winners.sort());
    });

    it('records one decision among twenty concurrent deciders, with only the winner’s patch', async () => {
      const handles = await shared();
      await handles[0]?.identity.approvals.create(approval);
      const outcomes = await race(handles, 20, (store, index) =>
        store.approvals.transition('approval-1', {
          from: ['pending'],
          to: index % 2 === 0 ? 'approved' : 'declined',
          now: t0 + index,
          patch: { reason: `decider-${index}` },
        }),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      const winner = outcomes.indexOf(true);
      expect(await handles[1]?.identity.approvals.get('approval-1')).toMatchObject({
        status: winner % 2 === 0 ? 'approved' : 'declined',
        reason: `decider-${winner}`,
        updatedAt: t0 + winner,
      });
    });

    it('hands one request to the parent once among twenty concurrent refusals through both handles', async () => {
      const handles = await shared();
      const first = handles[0]?.identity.approvals;
      await first?.create({ ...approval, requiredRoles: ['child'] });
      await first?.addApproval('approval-1', 'child', 'vc-child', t0 + 1);
      await first?.transition('approval-1', { from: ['pending'], to: 'approved', now: t0 + 2 });
      const outcomes = await race(handles, 20, (store, index) =>
        store.approvals.handToParent('approval-1', {
          cause: index % 2 === 0 ? 'budget-spent' : 'revoked',
          allowanceId: `urn:uuid:allowance-${index}`,
          period: 'day',
          at: t0 + 10 + index,
        }),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      const winner = outcomes.indexOf(true);
      expect(await handles[1]?.identity.approvals.get('approval-1')).toMatchObject({
        status: 'pending',
        requiredRoles: ['child', 'parent'],
        approvals: { child: 'vc-child' },
        handover: { allowanceId: `urn:uuid:allowance-${winner}`, at: t0 + 10 + winner },
        updatedAt: t0 + 10 + winner,
      });
    });

    it("keeps one zone among twenty concurrent first starts, and the other handle reads the parent's names", async () => {
      const handles = await shared();
      const zones = ['Europe/Paris', 'Asia/Tokyo', 'America/New_York', 'UTC'];
      const outcomes = await race(handles, 20, (store, index) =>
        store.profile.initTimeZone({ timeZone: zones[index % zones.length] ?? 'UTC', setAt: t0 + index }),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      expect((await handles[1]?.identity.profile.timeZone())?.timeZone).toBe(zones[outcomes.indexOf(true) % 4]);
      await handles[0]?.identity.profile.setName({ role: 'child', name: 'Sam', setAt: t0 });
      expect(await handles[1]?.identity.profile.names()).toStrictEqual([{ role: 'child', name: 'Sam', setAt: t0 }]);
    });

    it('pins a merchant once among ten concurrent adds with different keys', async () => {
      const handles = await shared();
      const outcomes = await race(handles, 10, (store, index) =>
        store.merchants.add({ did: 'did:key:shop', name: 'Pizza', publicKeyJwk: { x: `k${index}` }, trustedAt: t0 }),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      expect((await handles[1]?.identity.merchants.get('did:key:shop'))?.publicKeyJwk).toEqual({
        x: `k${outcomes.indexOf(true)}`,
      });
    });
  });
});

/**
 * The PostgreSQL tables' own lines where the store's checks keep every interface call from
 * reaching them, and its order where the rows' physical order would otherwise show.
 */
describe.skipIf(!postgresAvailable)('the PostgreSQL identity tables', () => {
  /** A fresh database with the household's tables, its store, and a plain client on it. */
  const open = async () => {
    const opener = implementations.postgres as (typeof implementations)['sqlite'];
    const url = await opener.location();
    const handle = await opener.open(url);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    return { store: handle.identity, client };
  };

  it('refuse a member name of another role and a second settings row, and keep what was there', async () => {
    const { store, client } = await open();
    try {
      await store.profile.setName({ role: 'child', name: 'Sam', setAt: t0 });
      await store.profile.initTimeZone({ timeZone: 'UTC', setAt: t0 });
      // The store parses the role and always writes settings row 1, so only SQL reaches these.
      await expect(
        client.query("INSERT INTO member_names (role, name, set_at) VALUES ('admin', 'Eve', 0)"),
      ).rejects.toThrow(/member_names_role_check/);
      await expect(
        client.query("INSERT INTO household_settings (id, time_zone, set_at) VALUES (2, 'Asia/Tokyo', 0)"),
      ).rejects.toThrow(/household_settings_id_check/);
      expect(await store.profile.names()).toStrictEqual([{ role: 'child', name: 'Sam', setAt: t0 }]);
      expect(await store.profile.timeZone()).toStrictEqual({ timeZone: 'UTC', setAt: t0 });
    } finally {
      await client.end();
    }
  });

  it('refuse a hand-over on a request that does not ask the parent, and one that is not JSON', async () => {
    const { store, client } = await open();
    try {
      await store.approvals.create({ ...approval, requiredRoles: ['child'] });
      // The store writes a hand-over only with both roles asked, so only SQL reaches these.
      await expect(
        client.query(`UPDATE approvals SET handover = '{"cause":"revoked"}' WHERE approval_id = 'approval-1'`),
      ).rejects.toThrow(/approvals_handover_check/);
      await expect(
        client.query(
          `UPDATE approvals SET handover = 'not json', required_roles = '["child","parent"]' WHERE approval_id = 'approval-1'`,
        ),
      ).rejects.toThrow(/json/i);
      expect(await store.approvals.get('approval-1')).toStrictEqual({ ...approval, requiredRoles: ['child'] });
    } finally {
      await client.end();
    }
  });

  it('lists passkeys and merchants in insertion order within one millisecond, whatever order their rows lie in', async () => {
    const { store, client } = await open();
    try {
      const ids = ['cred-b', 'cred-a', 'cred-c'];
      for (const credentialId of ids) await store.passkeys.add({ ...passkey, credentialId });
      const dids = ['did:key:b', 'did:key:a', 'did:key:c'];
      for (const did of dids) await store.merchants.add({ did, name: did, publicKeyJwk: { x: did }, trustedAt: t0 });
      // An update or a vacuum moves rows within the heap; here each table is rewritten with its
      // rows in reverse, each keeping its position, so a scan meets them newest first.
      for (const table of ['passkeys', 'merchants']) {
        await client.query('BEGIN');
        await client.query(`CREATE TEMP TABLE moved ON COMMIT DROP AS SELECT * FROM ${table}`);
        await client.query(`DELETE FROM ${table}`);
        await client.query(`INSERT INTO ${table} OVERRIDING SYSTEM VALUE SELECT * FROM moved ORDER BY position DESC`);
        await client.query('COMMIT');
      }
      const scanned = await client.query<{ credential_id: string }>('SELECT credential_id FROM passkeys');
      expect(scanned.rows.map((row) => row.credential_id)).toStrictEqual([...ids].reverse());
      expect((await store.passkeys.listByRole('child')).map((record) => record.credentialId)).toStrictEqual(ids);
      expect((await store.merchants.list()).map((record) => record.did)).toStrictEqual(dids);
    } finally {
      await client.end();
    }
  });
});
