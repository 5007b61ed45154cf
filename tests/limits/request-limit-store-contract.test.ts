/**
 * One contract for every request-limit store (issue 26 defect 6, issue 28), run on SQLite and
 * PostgreSQL: a pending-approval slot is taken only under both caps, counted from identity's
 * approvals, and a rate limit counts a sliding window. The shared part reserves through two
 * handles on one store at once: the caps hold across instances, never one slot over.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { ApprovalRecord } from '../../identity/index';
import { type HouseholdStoreHandle, householdStoreOpeners } from '../support/household-store-openers';
import { postgresAvailable, postgresUnavailable } from '../support/postgres';

const { implementations, cleanUp } = householdStoreOpeners();
afterEach(cleanUp);

it.skipIf(postgresAvailable)(`the PostgreSQL request limits are skipped: ${postgresUnavailable}`, () => {});

const t0 = 1_750_000_000_000;
const caps = { perRequester: 3, perHousehold: 5, holdMs: 60_000 } as const;

function approvalFor(index: number, overrides: Partial<ApprovalRecord> = {}): ApprovalRecord {
  return {
    approvalId: `approval-${index}`,
    invoiceId: `urn:uuid:invoice-${index}`,
    invoice: 'eyJ.invoice.jws',
    invoiceHash: `hash-${index}`,
    merchantDid: 'did:key:z6MkShop',
    totalCents: 1500,
    currency: 'USD',
    requiredRoles: ['child', 'parent'],
    approvals: {},
    status: 'pending',
    createdAt: t0,
    expiresAt: t0 + 300_000,
    updatedAt: t0,
    ...overrides,
  };
}

/** Takes a slot and creates and binds its request, as `request_approval` does. */
async function fill(store: HouseholdStoreHandle, requester: string, index: number, now = t0) {
  const slot = await store.limits.reserveApproval({ requester, now, ...caps });
  if (!slot.ok) return slot;
  await store.identity.approvals.create(approvalFor(index));
  await store.limits.bindApproval(slot.reservation, `approval-${index}`);
  return slot;
}

describe.each(Object.entries(implementations))('the %s request-limit store', (_name, kind) => {
  const handle = async (location?: string) => kind.open(location ?? (await kind.location()));

  describe('single instance', () => {
    it('takes slots up to the requester cap, then refuses naming the requester and the count', async () => {
      const store = await handle();
      for (const index of [1, 2, 3]) expect((await fill(store, 'alice', index)).ok).toBe(true);
      expect(await store.limits.reserveApproval({ requester: 'alice', now: t0, ...caps })).toStrictEqual({
        ok: false,
        scope: 'requester',
        pending: 3,
      });
      expect((await store.limits.reserveApproval({ requester: 'bob', now: t0, ...caps })).ok).toBe(true);
    });

    it('refuses at the household cap whoever asks, counting pending requests without a slot too', async () => {
      const store = await handle();
      await store.identity.approvals.create(approvalFor(90));
      await store.identity.approvals.create(approvalFor(91));
      expect((await fill(store, 'alice', 1)).ok).toBe(true);
      expect((await fill(store, 'bob', 2)).ok).toBe(true);
      // An unbound slot being filled counts as well.
      expect((await store.limits.reserveApproval({ requester: 'carol', now: t0, ...caps })).ok).toBe(true);
      expect(await store.limits.reserveApproval({ requester: 'dave', now: t0, ...caps })).toStrictEqual({
        ok: false,
        scope: 'household',
        pending: 5,
      });
    });

    it('frees a slot when its request is decided or expires, when released, and when its hold runs out', async () => {
      const store = await handle();
      for (const index of [1, 2, 3]) await fill(store, 'alice', index);
      await store.identity.approvals.transition('approval-1', { from: ['pending'], to: 'declined', now: t0 + 1 });
      const fourth = await store.limits.reserveApproval({ requester: 'alice', now: t0 + 1, ...caps });
      expect(fourth.ok).toBe(true);
      if (fourth.ok) await store.limits.releaseApproval(fourth.reservation);
      const fifth = await store.limits.reserveApproval({ requester: 'alice', now: t0 + 2, ...caps });
      expect(fifth.ok).toBe(true);
      // The unbound slot holds until holdMs; the requests until they expire.
      expect((await store.limits.reserveApproval({ requester: 'alice', now: t0 + 3, ...caps })).ok).toBe(false);
      expect((await store.limits.reserveApproval({ requester: 'alice', now: t0 + 2 + caps.holdMs, ...caps })).ok).toBe(
        true,
      );
      const afterExpiry = t0 + 300_000;
      for (let index = 0; index < 3; index += 1) {
        expect((await store.limits.reserveApproval({ requester: 'alice', now: afterExpiry, ...caps })).ok).toBe(true);
      }
    });

    it('frees a second slot bound to a request that already has one', async () => {
      const store = await handle();
      await fill(store, 'alice', 1);
      const again = await store.limits.reserveApproval({ requester: 'alice', now: t0, ...caps });
      if (!again.ok) throw new Error('no slot');
      await store.limits.bindApproval(again.reservation, 'approval-1');
      // One request, one slot: alice has two left.
      expect((await store.limits.reserveApproval({ requester: 'alice', now: t0, ...caps })).ok).toBe(true);
      expect((await store.limits.reserveApproval({ requester: 'alice', now: t0, ...caps })).ok).toBe(true);
      expect((await store.limits.reserveApproval({ requester: 'alice', now: t0, ...caps })).ok).toBe(false);
    });

    it('counts a rate limit in a sliding window, per key, with the wait until the oldest leaves', async () => {
      const { limits } = await handle();
      const take = (key: string, now: number) => limits.take({ key, now, limit: 2, windowMs: 1_000 });
      expect(await take('k', t0)).toStrictEqual({ ok: true });
      expect(await take('k', t0 + 400)).toStrictEqual({ ok: true });
      expect(await take('k', t0 + 500)).toStrictEqual({ ok: false, retryAfterMs: 500 });
      expect(await take('other', t0 + 500)).toStrictEqual({ ok: true });
      expect(await take('k', t0 + 1_000)).toStrictEqual({ ok: true });
    });
  });

  describe('shared: two handles on one store', () => {
    const twoHandles = async () => {
      const location = await kind.location();
      return [await handle(location), await handle(location)] as const;
    };
    const reserveAll = (
      handles: readonly HouseholdStoreHandle[],
      count: number,
      requester: (index: number) => string,
    ) =>
      Promise.all(
        Array.from({ length: count }, (_, index) =>
          (handles[index % 2] as HouseholdStoreHandle).limits.reserveApproval({
            requester: requester(index),
            now: t0,
            ...caps,
            perHousehold: 20,
          }),
        ),
      );

    it('never goes over the household cap: 40 concurrent reservations from 40 requesters take exactly 20', async () => {
      const handles = await twoHandles();
      for (let round = 0; round < 3; round += 1) {
        const outcomes = await reserveAll(handles, 40, (index) => `r${round}-${index}`);
        expect(outcomes.filter((outcome) => outcome.ok)).toHaveLength(round === 0 ? 20 : 0);
      }
    });

    it('never goes over the requester cap: 20 concurrent reservations of one requester take exactly 3', async () => {
      const handles = await twoHandles();
      const outcomes = await reserveAll(handles, 20, () => 'alice');
      expect(outcomes.filter((outcome) => outcome.ok)).toHaveLength(3);
    });

    it('binds two slots to one request at once without error, keeping one', async () => {
      const [a, b] = await twoHandles();
      await a.identity.approvals.create(approvalFor(1));
      const slots = await Promise.all(
        [a, b, a, b].map((store) => store.limits.reserveApproval({ requester: 'alice', now: t0, ...caps })),
      );
      const reservations = slots.flatMap((slot) => (slot.ok ? [slot.reservation] : []));
      expect(reservations).toHaveLength(3);
      await Promise.all(
        reservations.map((reservation, index) =>
          (index % 2 === 0 ? a : b).limits.bindApproval(reservation, 'approval-1'),
        ),
      );
      // One request holds one slot: two more for alice, not zero.
      expect((await a.limits.reserveApproval({ requester: 'alice', now: t0, ...caps })).ok).toBe(true);
      expect((await b.limits.reserveApproval({ requester: 'alice', now: t0, ...caps })).ok).toBe(true);
      expect((await a.limits.reserveApproval({ requester: 'alice', now: t0, ...caps })).ok).toBe(false);
    });

    it('never goes over a rate limit: 30 concurrent takes of one key take exactly 10', async () => {
      const handles = await twoHandles();
      const outcomes = await Promise.all(
        Array.from({ length: 30 }, (_, index) =>
          (handles[index % 2] as HouseholdStoreHandle).limits.take({ key: 'k', now: t0, limit: 10, windowMs: 60_000 }),
        ),
      );
      expect(outcomes.filter((outcome) => outcome.ok)).toHaveLength(10);
    });
  });
});

/** The PostgreSQL table's own lines, which the store's lock keeps any interface call from reaching. */
describe.skipIf(!postgresAvailable)('the PostgreSQL approval slots table', () => {
  it('refuses a reservation id given twice, a request bound to two slots and a second counter row, and keeps the first of each', async () => {
    const opener = implementations.postgres as (typeof implementations)['sqlite'];
    const url = await opener.location();
    await opener.open(url);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const insert = (reservation: string, approval: string) =>
        client.query(
          `INSERT INTO approval_slots (reservation_id, requester, reserved_at, approval_id) VALUES ('${reservation}', 'alice', 0, '${approval}')`,
        );
      await insert('slot-1', 'approval-1');
      await expect(insert('slot-1', 'approval-2')).rejects.toThrow(/approval_slots_pkey/);
      await expect(insert('slot-2', 'approval-1')).rejects.toThrow(/approval_slots_approval_id_key/);
      const kept = await client.query<{ reservation_id: string; approval_id: string }>(
        'SELECT reservation_id, approval_id FROM approval_slots',
      );
      expect(kept.rows).toStrictEqual([{ reservation_id: 'slot-1', approval_id: 'approval-1' }]);
      // The household's counter row, which every reservation locks, is one row.
      await expect(client.query("INSERT INTO request_limit_locks (name) VALUES ('household')")).rejects.toThrow(
        /request_limit_locks_pkey/,
      );
    } finally {
      await client.end();
    }
  });
});

describe.skipIf(!postgresAvailable)('the PostgreSQL limits while another instance has not committed', () => {
  /** Commits `other`'s open transaction once `pending` waits on a lock of kind `event`, or has already answered. */
  const commitOnceWaiting = async (other: pg.Client, pending: Promise<unknown>, event: string) => {
    let settled = false;
    const settle = () => {
      settled = true;
    };
    void pending.then(settle, settle);
    const waiting = `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = '${event}'`;
    while (!settled && (await other.query(waiting)).rowCount === 0);
    await other.query('COMMIT');
  };

  it("counts a slot another instance has not committed yet: the household's row makes the next reservation wait for it", async () => {
    const opener = implementations.postgres as (typeof implementations)['sqlite'];
    const url = await opener.location();
    const store = await opener.open(url);
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    try {
      await other.query('BEGIN');
      const first = await other.query<{ ok: boolean }>(
        'SELECT ok FROM limits_reserve_approval($1, $2, $3, $4, $5, $6)',
        ['slot-other', 'alice', t0, 60_000, 1, 20],
      );
      expect(first.rows[0]?.ok).toBe(true);
      const second = store.limits.reserveApproval({
        requester: 'alice',
        now: t0,
        perRequester: 1,
        perHousehold: 20,
        holdMs: 60_000,
      });
      await commitOnceWaiting(other, second, 'transactionid');
      expect(await second).toMatchObject({ ok: false, scope: 'requester', pending: 1 });
    } finally {
      await other.end();
    }
  });

  it("counts a take another instance has not committed yet: the key's lock makes the next take wait for it", async () => {
    // A take is one statement, so two racing takes overlap only for a moment; here the first is
    // held open in a transaction of its own, and the store's take must wait for it and count it.
    const opener = implementations.postgres as (typeof implementations)['sqlite'];
    const url = await opener.location();
    const store = await opener.open(url);
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    try {
      await other.query('BEGIN');
      const first = await other.query<{ ok: boolean }>('SELECT ok FROM limits_take($1, $2, $3, $4)', [
        'k',
        t0,
        60_000,
        1,
      ]);
      expect(first.rows[0]?.ok).toBe(true);
      const second = store.limits.take({ key: 'k', now: t0, limit: 1, windowMs: 60_000 });
      await commitOnceWaiting(other, second, 'advisory');
      expect(await second).toMatchObject({ ok: false });
    } finally {
      await other.end();
    }
  });
});
