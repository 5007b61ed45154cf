/**
 * The decisions' channel on PostgreSQL (docs/scale-out.md, live events across instances): a change
 * of an approval request or a call-approval request committed through one pool pokes the watchers
 * of that request on another, and only theirs; a change that does not apply notifies nobody; a
 * watcher is poked once the listener is in place for it; and after the listener's connection is
 * killed, every watcher is poked once it listens again, so a change committed while it was down
 * is read.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { ApprovalRecord, CallApprovalRecord } from '../identity/index';
import { openPostgresPool } from '../proxy/index';
import { createTestDatabase, postgresAvailable, postgresUnavailable } from '../tests/support/postgres';
import { createPostgresCallApprovalStore, postgresCallApprovalMigrations } from './postgres-call-approval-store';
import { createPostgresDecisionChannel } from './postgres-decision-channel';
import { createPostgresIdentityStore, postgresIdentityMigrations } from './postgres-identity-store';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const t0 = 1_750_000_000_000;
const approval = (approvalId: string): ApprovalRecord => ({
  approvalId,
  invoiceId: `urn:uuid:invoice-of-${approvalId}`,
  invoice: 'eyJ.invoice.jws',
  invoiceHash: `hash-of-${approvalId}`,
  merchantDid: 'did:key:z6MkShop',
  totalCents: 1500,
  currency: 'usd',
  requiredRoles: ['child', 'parent'],
  approvals: {},
  status: 'pending',
  createdAt: t0,
  expiresAt: t0 + 300_000,
  updatedAt: t0,
});
const callRequest: CallApprovalRecord = {
  requestId: 'request-1',
  tool: 'pizza__cancel_order',
  call: '{"arguments":{"orderId":"o-1"},"tool":"pizza__cancel_order"}',
  callHash: 'call-hash-1',
  requiredRoles: ['child'],
  approvals: {},
  status: 'pending',
  createdAt: t0,
  expiresAt: t0 + 600_000,
  updatedAt: t0,
};

/** A pool on `url` with the two approval modules migrated, closed after the test. */
async function pool(url: string): Promise<pg.Pool> {
  const opened = await openPostgresPool({
    url,
    migrations: { identity: postgresIdentityMigrations, 'call-approvals': postgresCallApprovalMigrations },
    what: 'decision channel test',
  });
  closers.push(() => opened.end());
  return opened;
}

/** What happened on a channel, in order, and a way to wait for the next thing. */
function recorder() {
  const seen: string[] = [];
  let changed: () => void = () => undefined;
  return {
    seen,
    record(entry: string) {
      seen.push(entry);
      changed();
    },
    /** Resolves once `entry` was recorded after index `from`; the index after it. */
    async next(entry: string, from: number): Promise<number> {
      for (;;) {
        const found = seen.indexOf(entry, from);
        if (found >= 0) return found + 1;
        await new Promise<void>((resolve) => {
          changed = resolve;
        });
      }
    },
  };
}

it.skipIf(postgresAvailable)(`the PostgreSQL decisions' channel is skipped: ${postgresUnavailable}`, () => {});

describe.skipIf(!postgresAvailable)("the PostgreSQL decisions' channel", () => {
  it('pokes the watchers of a request another pool changed, and only theirs; a change that does not apply notifies nobody', async () => {
    const url = await createTestDatabase();
    const [here, there] = [await pool(url), await pool(url)];
    const log = recorder();
    const channel = createPostgresDecisionChannel(here, { onListener: (state) => log.record(state) });
    const writer = { identity: createPostgresIdentityStore(there), calls: createPostgresCallApprovalStore(there) };
    await writer.identity.approvals.create(approval('approval-1'));
    await writer.identity.approvals.create(approval('approval-2'));
    await writer.calls.create(callRequest);
    const stops = ['approval-1', 'approval-2', 'request-1'].map((id) =>
      channel.watch(id, () => log.record(`poke ${id}`)),
    );
    closers.push(async () => {
      for (const stop of stops) stop();
    });
    // Up: every watcher is poked first (whatever committed before it listened), then it says so.
    const up = await log.next('listening', 0);
    expect(log.seen.slice(0, up)).toEqual(['poke approval-1', 'poke approval-2', 'poke request-1', 'listening']);
    let at = up;
    // Refused (wrong status, a role already there): nothing committed, nothing announced.
    expect(
      await writer.identity.approvals.transition('approval-2', { from: ['approved'], to: 'settled', now: t0 }),
    ).toBe(false);
    expect(await writer.identity.approvals.addApproval('approval-1', 'child', 'eyJ.child', t0)).toBe(true);
    at = await log.next('poke approval-1', at);
    expect(await writer.identity.approvals.addApproval('approval-1', 'child', 'eyJ.again', t0)).toBe(false);
    expect(
      await writer.identity.approvals.transition('approval-1', { from: ['pending'], to: 'declined', now: t0 }),
    ).toBe(true);
    at = await log.next('poke approval-1', at);
    expect(await writer.calls.transition('request-1', { from: ['pending'], to: 'declined', now: t0 })).toBe(true);
    at = await log.next('poke request-1', at);
    // Notifications arrive in commit order: anything for approval-2 would have come before these.
    expect(log.seen.slice(up)).toEqual(['poke approval-1', 'poke approval-1', 'poke request-1']);
    // A watch begun while it listens is poked at once: a change just before it was announced to nobody.
    stops.push(channel.watch('approval-3', () => log.record('poke approval-3')));
    expect(log.seen.slice(at)).toEqual(['poke approval-3']);
  });

  it('pokes every watcher once it listens again after its connection was killed, so a change made meanwhile is read', async () => {
    const url = await createTestDatabase();
    const [here, there] = [await pool(url), await pool(url)];
    const log = recorder();
    // A slow first reconnect, so the change committed while it is down is not announced to it.
    const channel = createPostgresDecisionChannel(here, {
      reconnect: { first: 2000, max: 4000 },
      onListener: (state) => log.record(state),
    });
    const writer = createPostgresIdentityStore(there);
    await writer.approvals.create(approval('approval-1'));
    const stop = channel.watch('approval-1', () => log.record('poke'));
    closers.push(async () => stop());
    let at = await log.next('listening', 0);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    closers.push(() => admin.end());
    const listeners = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN approval_decisions'",
    );
    expect(listeners.rows).toHaveLength(1);
    await admin.query('SELECT pg_terminate_backend($1)', [listeners.rows[0]?.pid]);
    at = await log.next('lost', at);
    expect(await writer.approvals.transition('approval-1', { from: ['pending'], to: 'declined', now: t0 })).toBe(true);
    // The notification went to nobody; back up, the watcher is poked and reads the change.
    const back = await log.next('listening', at);
    expect(log.seen.slice(at, back)).toEqual(['poke', 'listening']);
  });
});
