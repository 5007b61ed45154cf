/**
 * One contract for every call-approval store (docs/human-authority.md "`approval_required`"; issue
 * 28), run on SQLite and PostgreSQL. The single-instance part is what any implementation shows;
 * the shared part opens two handles on one location (two SQLite connections, two `pg` pools) and
 * races them: a decision is recorded once, and a call hash has one open request, however many
 * instances are asked at once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { CallApprovalRecord, CallApprovalStore } from '../../identity/index';
import { type HouseholdStoreHandle as Handle, householdStoreOpeners } from '../support/household-store-openers';
import { postgresAvailable, postgresUnavailable } from '../support/postgres';

const { implementations, cleanUp } = householdStoreOpeners();
afterEach(cleanUp);

it.skipIf(postgresAvailable)(`the PostgreSQL call-approval store is skipped: ${postgresUnavailable}`, () => {});

const t0 = 1_750_000_000_000;

const request: CallApprovalRecord = {
  requestId: 'request-1',
  tool: 'pizza__cancel_order',
  call: '{"arguments":{"orderId":"o-1"},"tool":"pizza__cancel_order"}',
  callHash: 'hash-1',
  requiredRoles: ['child'],
  approvals: {},
  status: 'pending',
  createdAt: t0,
  expiresAt: t0 + 600_000,
  updatedAt: t0,
};

function requestFor(index: number, overrides: Partial<CallApprovalRecord> = {}): CallApprovalRecord {
  return {
    ...request,
    requestId: `request-${index}`,
    callHash: `hash-${index}`,
    createdAt: t0 + index,
    updatedAt: t0 + index,
    ...overrides,
  };
}

/** `count` calls of `run`, alternating between the handles, all started at once. */
function race<T>(
  handles: readonly Handle[],
  count: number,
  run: (store: CallApprovalStore, index: number) => Promise<T>,
): Promise<T[]> {
  return Promise.all(
    Array.from({ length: count }, (_, index) => run((handles[index % handles.length] as Handle).callApprovals, index)),
  );
}

describe.each(Object.entries(implementations))('the %s call-approval store', (_name, kind) => {
  const handle = async (location?: string): Promise<Handle> => kind.open(location ?? (await kind.location()));
  const store = async () => (await handle()).callApprovals;
  /** Two independent handles on one fresh location. */
  const shared = async (): Promise<Handle[]> => {
    const location = await kind.location();
    return [await handle(location), await handle(location)];
  };

  describe('single instance', () => {
    it('creates a request and reads it back exactly, by id and as the open one of its call hash', async () => {
      const calls = await store();
      expect(await calls.create(request)).toStrictEqual({ record: request, created: true });
      expect(await calls.get('request-1')).toStrictEqual(request);
      expect(await calls.findOpen('hash-1')).toStrictEqual(request);
      expect(await calls.get('request-other')).toBeUndefined();
      expect(await calls.findOpen('hash-other')).toBeUndefined();
    });

    it('keeps one open request per call hash: a second create returns the open one and stores nothing', async () => {
      const calls = await store();
      await calls.create(request);
      const again = await calls.create({ ...request, requestId: 'request-again', requiredRoles: ['parent'] });
      expect(again).toStrictEqual({ record: request, created: false });
      expect(await calls.get('request-again')).toBeUndefined();
      // Approved is still open: the call has not run yet.
      await calls.transition('request-1', { from: ['pending'], to: 'approved', now: t0 + 1 });
      expect((await calls.create({ ...request, requestId: 'request-again' })).created).toBe(false);
      expect(await calls.get('request-again')).toBeUndefined();
    });

    it('opens a new request for a call hash once its request is closed, and finds the new one', async () => {
      const calls = await store();
      await calls.create(request);
      await calls.transition('request-1', { from: ['pending'], to: 'declined', now: t0 + 1, reason: 'no' });
      const next = { ...request, requestId: 'request-next', createdAt: t0 + 2, updatedAt: t0 + 2 };
      expect(await calls.create(next)).toStrictEqual({ record: next, created: true });
      expect(await calls.findOpen('hash-1')).toStrictEqual(next);
      await calls.transition('request-next', { from: ['pending'], to: 'expired', now: t0 + 3 });
      expect(await calls.findOpen('hash-1')).toBeUndefined();
    });

    it('opens a new request only below the bound of waiting ones, where expired and closed ones do not count', async () => {
      const calls = await store();
      for (const index of [1, 2, 3])
        expect((await calls.create(requestFor(index), { maxPending: 3 })).created).toBe(true);
      expect(await calls.create(requestFor(4), { maxPending: 3 })).toStrictEqual({ created: false, full: true });
      expect(await calls.get('request-4')).toBeUndefined();
      // Full, a call that has its open request still finds it.
      expect(await calls.create({ ...requestFor(1), requestId: 'request-1-again' }, { maxPending: 3 })).toStrictEqual({
        record: requestFor(1),
        created: false,
      });
      await calls.transition('request-2', { from: ['pending'], to: 'declined', now: t0 + 10 });
      expect((await calls.create(requestFor(4), { maxPending: 3 })).created).toBe(true);
      // Past their expiry, pending rows wait for nobody: a request made then is counted against none of them.
      const later = t0 + 600_000 + 10;
      expect(
        (await calls.create(requestFor(5, { createdAt: later, expiresAt: later + 600_000 }), { maxPending: 1 }))
          .created,
      ).toBe(true);
      expect(
        await calls.create(requestFor(6, { createdAt: later, expiresAt: later + 600_000 }), { maxPending: 1 }),
      ).toStrictEqual({
        created: false,
        full: true,
      });
    });

    it('refuses a request id already used, for another call hash too, and changes nothing', async () => {
      const calls = await store();
      await calls.create(request);
      await expect(calls.create({ ...request, callHash: 'hash-2', tool: 'other' })).rejects.toMatchObject({
        code: 'conflict',
      });
      expect(await calls.get('request-1')).toStrictEqual(request);
      expect(await calls.findOpen('hash-2')).toBeUndefined();
    });

    it('lists pending requests oldest first, in insertion order within one millisecond', async () => {
      const calls = await store();
      await calls.create(requestFor(3, { createdAt: t0 + 5 }));
      await calls.create(requestFor(1, { createdAt: t0 + 5 }));
      await calls.create(requestFor(2, { createdAt: t0 }));
      await calls.create(requestFor(4, { status: 'declined' }));
      // An update moves a row's storage (here, of an indexed column), never its place in the order.
      await calls.transition('request-3', { from: ['pending'], to: 'approved', now: t0 + 6 });
      await calls.transition('request-3', { from: ['approved'], to: 'pending', now: t0 + 7 });
      expect((await calls.listPending()).map((record) => record.requestId)).toStrictEqual([
        'request-2',
        'request-3',
        'request-1',
      ]);
    });

    it("adds a role's approval once, only while pending, and keeps the first credential", async () => {
      const calls = await store();
      await calls.create({ ...request, requiredRoles: ['child', 'parent'] });
      expect(await calls.addApproval('request-1', 'child', 'eyJ.child.1', t0 + 1)).toBe(true);
      expect(await calls.addApproval('request-1', 'child', 'eyJ.child.2', t0 + 2)).toBe(false);
      expect(await calls.addApproval('request-1', 'parent', 'eyJ.parent', t0 + 3)).toBe(true);
      expect(await calls.get('request-1')).toMatchObject({
        approvals: { child: 'eyJ.child.1', parent: 'eyJ.parent' },
        updatedAt: t0 + 3,
      });
      await calls.transition('request-1', { from: ['pending'], to: 'declined', now: t0 + 4 });
      await calls.create({ ...request, requestId: 'request-2', callHash: 'hash-2' });
      await calls.transition('request-2', { from: ['pending'], to: 'expired', now: t0 + 4 });
      expect(await calls.addApproval('request-2', 'child', 'eyJ.late', t0 + 5)).toBe(false);
      expect((await calls.get('request-2'))?.approvals).toStrictEqual({});
      expect(await calls.addApproval('request-missing', 'child', 'eyJ', t0 + 5)).toBe(false);
    });

    it('moves a request only from the statuses given, and keeps the reason of the move that made it', async () => {
      const calls = await store();
      await calls.create(request);
      expect(await calls.transition('request-1', { from: ['approved'], to: 'used', now: t0 + 1 })).toBe(false);
      expect(await calls.transition('request-1', { from: ['pending'], to: 'approved', now: t0 + 2 })).toBe(true);
      expect(await calls.transition('request-1', { from: ['pending'], to: 'declined', now: t0 + 3 })).toBe(false);
      expect(await calls.transition('request-1', { from: ['approved'], to: 'used', now: t0 + 4 })).toBe(true);
      expect(await calls.get('request-1')).toMatchObject({ status: 'used', updatedAt: t0 + 4 });
      expect(await calls.get('request-1')).not.toHaveProperty('reason');
      await calls.create(requestFor(2));
      await calls.transition('request-2', { from: ['pending'], to: 'expired', now: t0 + 5, reason: 'too late' });
      expect(await calls.get('request-2')).toMatchObject({ status: 'expired', reason: 'too late' });
      expect(await calls.transition('request-missing', { from: ['pending'], to: 'used', now: t0 })).toBe(false);
    });

    it('refuses a status or a role outside its closed set, and changes nothing', async () => {
      const calls = await store();
      await expect(calls.create({ ...request, status: 'paid' as never })).rejects.toMatchObject({
        code: 'store-failed',
      });
      expect(await calls.get('request-1')).toBeUndefined();
      await calls.create(request);
      await expect(
        calls.transition('request-1', { from: ['pending'], to: 'paid' as never, now: t0 + 1 }),
      ).rejects.toMatchObject({ code: 'store-failed' });
      await expect(calls.addApproval('request-1', 'admin' as never, 'eyJ', t0 + 1)).rejects.toMatchObject({
        code: 'store-failed',
      });
      expect(await calls.get('request-1')).toStrictEqual(request);
    });
  });

  describe('shared: two handles on one store', () => {
    it('sees through one handle what the other wrote', async () => {
      const [a, b] = (await shared()) as [Handle, Handle];
      await a.callApprovals.create(request);
      expect(await b.callApprovals.findOpen('hash-1')).toStrictEqual(request);
      expect(await b.callApprovals.addApproval('request-1', 'child', 'eyJ.child', t0 + 1)).toBe(true);
      expect(await a.callApprovals.transition('request-1', { from: ['pending'], to: 'approved', now: t0 + 2 })).toBe(
        true,
      );
      expect(await b.callApprovals.get('request-1')).toMatchObject({
        status: 'approved',
        approvals: { child: 'eyJ.child' },
      });
    });

    it('opens one request among 50 concurrent creates of one call hash, and every creator hears that one', async () => {
      const handles = await shared();
      for (let round = 0; round < 3; round += 1) {
        const callHash = `hash-round-${round}`;
        const outcomes = await race(handles, 50, (calls, index) =>
          calls.create({ ...request, requestId: `round-${round}-${index}`, callHash }),
        );
        const created = outcomes.filter((outcome) => outcome.created);
        expect(created).toHaveLength(1);
        const winner = created[0]?.record.requestId;
        expect(
          new Set(outcomes.map((outcome) => ('record' in outcome ? outcome.record.requestId : 'full'))),
        ).toStrictEqual(new Set([winner]));
        for (const { callApprovals } of handles) {
          expect((await callApprovals.findOpen(callHash))?.requestId).toBe(winner);
          expect((await callApprovals.listPending()).filter((record) => record.callHash === callHash)).toHaveLength(1);
        }
      }
    });

    it('opens exactly as many requests as the bound allows among 40 concurrent creates of other calls through two handles', async () => {
      for (let round = 0; round < 3; round += 1) {
        const handles = await shared();
        const outcomes = await race(handles, 40, (calls, index) => calls.create(requestFor(index), { maxPending: 20 }));
        expect(outcomes.filter((outcome) => outcome.created)).toHaveLength(20);
        expect(outcomes.filter((outcome) => 'full' in outcome)).toHaveLength(20);
        expect(await (handles[1] as Handle).callApprovals.listPending()).toHaveLength(20);
      }
    });

    it('gives the last place below the bound to exactly one of 40 concurrent creates through two handles, five rounds', async () => {
      for (let round = 0; round < 5; round += 1) {
        const handles = await shared();
        for (let index = 0; index < 19; index += 1) {
          await (handles[0] as Handle).callApprovals.create(requestFor(index), { maxPending: 20 });
        }
        // Both pools' connections opened first, so the creates meet in the database at once
        // instead of one per connection made. Every create counts 19 waiting: one may insert.
        await race(handles, 40, (calls) => calls.listPending());
        const outcomes = await race(handles, 40, (calls, index) =>
          calls.create(requestFor(100 + index), { maxPending: 20 }),
        );
        expect(outcomes.filter((outcome) => outcome.created)).toHaveLength(1);
        expect(await (handles[1] as Handle).callApprovals.listPending()).toHaveLength(20);
      }
    });

    it('records one decision among 50 concurrent deciders through two handles, with only the winner’s reason', async () => {
      const handles = await shared();
      await (handles[0] as Handle).callApprovals.create(request);
      const moves = await race(handles, 50, (calls, index) =>
        calls.transition('request-1', {
          from: ['pending'],
          to: index % 2 === 0 ? 'approved' : 'declined',
          now: t0 + index,
          reason: `decider ${index}`,
        }),
      );
      expect(moves.filter(Boolean)).toHaveLength(1);
      const winner = moves.indexOf(true);
      const stored = await (handles[1] as Handle).callApprovals.get('request-1');
      expect(stored).toMatchObject({
        status: winner % 2 === 0 ? 'approved' : 'declined',
        reason: `decider ${winner}`,
        updatedAt: t0 + winner,
      });
    });

    it('stores one approval of a role among 50 concurrent approvals through two handles, the winner’s', async () => {
      const handles = await shared();
      await (handles[0] as Handle).callApprovals.create({ ...request, requiredRoles: ['child', 'parent'] });
      const added = await race(handles, 50, (calls, index) =>
        calls.addApproval('request-1', index < 25 ? 'child' : 'parent', `eyJ.${index}`, t0 + index),
      );
      const childWins = added.slice(0, 25).flatMap((won, index) => (won ? [index] : []));
      const parentWins = added.slice(25).flatMap((won, index) => (won ? [index + 25] : []));
      expect(childWins).toHaveLength(1);
      expect(parentWins).toHaveLength(1);
      expect((await (handles[1] as Handle).callApprovals.get('request-1'))?.approvals).toStrictEqual({
        child: `eyJ.${childWins[0]}`,
        parent: `eyJ.${parentWins[0]}`,
      });
    });

    it('uses an approved request once among 50 concurrent spends through two handles', async () => {
      const handles = await shared();
      await (handles[0] as Handle).callApprovals.create(request);
      await (handles[1] as Handle).callApprovals.transition('request-1', {
        from: ['pending'],
        to: 'approved',
        now: t0,
      });
      const used = await race(handles, 50, (calls, index) =>
        calls.transition('request-1', { from: ['approved'], to: 'used', now: t0 + index }),
      );
      expect(used.filter(Boolean)).toHaveLength(1);
      expect((await (handles[0] as Handle).callApprovals.get('request-1'))?.status).toBe('used');
    });
  });
});
