import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { HouseholdEvent } from '../events';
import { type HouseholdStore, openSqliteHouseholdStore } from '../store';
import type { AuditEntry } from './audit-log';
import { canonicalJson, genesisHash, hashAuditRow } from './hash-audit-row';

const folders: string[] = [];
const stores: HouseholdStore[] = [];
afterEach(() => {
  for (const store of stores.splice(0)) store.close();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function fresh(): { store: HouseholdStore; path: string } {
  const folder = mkdtempSync(join(tmpdir(), 'audit-log-'));
  folders.push(folder);
  const path = join(folder, 'household.sqlite');
  return { store: open(path), path };
}

function open(path: string): HouseholdStore {
  const store = openSqliteHouseholdStore({ path });
  stores.push(store);
  return store;
}

function event(overrides: Partial<HouseholdEvent> = {}): HouseholdEvent {
  return {
    at: '2026-11-30T12:00:00.000Z',
    source: 'proxy',
    kind: 'call-decision',
    outcome: 'allow',
    session: 'session-a',
    message: 'policy allow payments__charge_invoice',
    data: { tool: 'payments__charge_invoice', durationUs: 12.5 },
    ...overrides,
  };
}

describe('the audit log', () => {
  it('chains each appended row to the one before it, from the genesis value', async () => {
    const { store } = fresh();
    expect(await store.audit.head()).toEqual({ rowId: 0, hash: genesisHash });
    const first = await store.audit.append(event());
    const second = await store.audit.append(event({ outcome: 'deny', orderId: 'urn:uuid:order-1' }));
    expect(first).toMatchObject({ id: 1, prevHash: genesisHash });
    expect(second).toMatchObject({ id: 2, prevHash: first.hash });
    expect(first.hash).toBe(hashAuditRow({ id: 1, prevHash: genesisHash, event: first.event }));
    expect(second.hash).toBe(hashAuditRow({ id: 2, prevHash: first.hash, event: second.event }));
    expect(second.hash).not.toBe(first.hash);
    expect(await store.audit.head()).toEqual({ rowId: 2, hash: second.hash });
  });

  it('stores the event as its RFC 8785 canonical bytes and commits it before append returns', async () => {
    const { store, path } = fresh();
    await store.audit.append(event({ data: { zeta: 1, alpha: 'x', durationUs: 1e21 } }));
    // Another connection sees the row at once: it is committed, not pending in a transaction.
    const reader = new Database(path, { readonly: true });
    try {
      const row = reader.prepare('SELECT event FROM audit_log WHERE id = 1').get() as { event: string };
      expect(row.event).toBe(canonicalJson(JSON.parse(row.event)));
      expect(row.event.indexOf('"alpha"')).toBeLessThan(row.event.indexOf('"zeta"'));
      expect(row.event).toContain('"durationUs":1e+21');
    } finally {
      reader.close();
    }
  });

  it('refuses UPDATE, DELETE and an insert that skips an id, by trigger', async () => {
    const { store, path } = fresh();
    await store.audit.append(event());
    await store.audit.append(event());
    const tamperer = new Database(path);
    try {
      expect(() => tamperer.prepare("UPDATE audit_log SET event = '{}' WHERE id = 1").run()).toThrow(/append-only/);
      expect(() => tamperer.prepare('DELETE FROM audit_log WHERE id = 2').run()).toThrow(/append-only/);
      expect(() =>
        tamperer
          .prepare('INSERT INTO audit_log (id, event, prev_hash, hash) VALUES (5, ?, ?, ?)')
          .run('{}', genesisHash, genesisHash),
      ).toThrow(/next id/);
      expect(tamperer.prepare('SELECT COUNT(*) AS n FROM audit_log').get()).toEqual({ n: 2 });
    } finally {
      tamperer.close();
    }
  });

  it('refuses an event that fails the schema and writes nothing', async () => {
    const { store } = fresh();
    await expect(store.audit.append({ ...event(), kind: 'NotKebab' })).rejects.toThrow();
    await expect(store.audit.append({ ...event(), token: 'secret' } as HouseholdEvent)).rejects.toThrow();
    expect((await store.audit.head()).rowId).toBe(0);
  });

  it('records an event carrying a lone surrogate, made well-formed, instead of losing it', async () => {
    const { store } = fresh();
    const entry = await store.audit.append(event({ message: 'call \uD800 refused' }));
    expect(entry.event.message).toBe('call \uFFFD refused');
    expect((await store.audit.after(0))[0]?.event.message).toBe('call \uFFFD refused');
  });

  it('reads entries after an id, in order, filtered and limited', async () => {
    const { store } = fresh();
    await store.audit.append(event({ session: 'a', kind: 'call-decision', outcome: 'allow' }));
    await store.audit.append(event({ session: 'b', kind: 'call-decision', outcome: 'deny', orderId: 'o-1' }));
    await store.audit.append(event({ session: 'a', kind: 'charge-succeeded', outcome: 'ok', orderId: 'o-1' }));
    await store.audit.append(event({ session: 'a', kind: 'call-decision', outcome: 'deny' }));
    const ids = (entries: readonly AuditEntry[]) => entries.map((entry) => entry.id);
    expect(ids(await store.audit.after(0))).toEqual([1, 2, 3, 4]);
    expect(ids(await store.audit.after(2))).toEqual([3, 4]);
    expect(ids(await store.audit.after(0, { limit: 2 }))).toEqual([1, 2]);
    expect(ids(await store.audit.after(0, { filter: { session: 'a' } }))).toEqual([1, 3, 4]);
    expect(ids(await store.audit.after(0, { filter: { outcome: 'deny' } }))).toEqual([2, 4]);
    expect(ids(await store.audit.after(0, { filter: { kind: 'call-decision', session: 'a' } }))).toEqual([1, 4]);
    expect(ids(await store.audit.after(1, { filter: { orderId: 'o-1' } }))).toEqual([2, 3]);
    expect(ids(await store.audit.forOrder('o-1'))).toEqual([2, 3]);
    expect(await store.audit.after(4)).toEqual([]);
    await expect(store.audit.after(-1)).rejects.toThrow();
    await expect(store.audit.after(0, { limit: 0 })).rejects.toThrow();
  });

  it('tells subscribers of each appended entry after it is written, and a throwing one stops nobody', async () => {
    const { store, path } = fresh();
    const reader = new Database(path, { readonly: true });
    const committed = () => (reader.prepare('SELECT COUNT(*) AS n FROM audit_log').get() as { n: number }).n;
    const seen: number[] = [];
    let delivered: () => void = () => undefined;
    const first = new Promise<void>((resolve) => {
      delivered = resolve;
    });
    store.audit.subscribe(() => {
      throw new Error('a closed stream');
    });
    const unsubscribe = store.audit.subscribe((entry) => {
      seen.push(committed(), entry.id);
      delivered();
    });
    try {
      await store.audit.append(event());
      await first;
      unsubscribe();
      await store.audit.append(event());
      expect(seen).toEqual([1, 1]);
      expect((await store.audit.head()).rowId).toBe(2);
    } finally {
      reader.close();
    }
  });

  it("never hands a subscriber its own handle's row over another handle's rows it has not read yet", async () => {
    const { store, path } = fresh();
    const other = open(path);
    const seen: number[] = [];
    let caughtUp: () => void = () => undefined;
    const four = new Promise<void>((resolve) => {
      caughtUp = resolve;
    });
    store.audit.subscribe(
      (entry) => {
        seen.push(entry.id);
        if (entry.id === 4) caughtUp();
      },
      { after: 0 },
    );
    await new Promise<void>((resolve) => setImmediate(resolve));
    // Rows 1–3 come through the other connection, which this handle hears of only at its next poll.
    for (const session of ['b1', 'b2', 'b3']) await other.audit.append(event({ session }));
    await store.audit.append(event());
    await four;
    expect(seen).toEqual([1, 2, 3, 4]);
  });

  it('extends one chain when two connections to the file append in turn', async () => {
    const { store, path } = fresh();
    const other = open(path);
    await store.audit.append(event());
    await other.audit.append(event({ session: 'other' }));
    const third = await store.audit.append(event());
    const entries = await store.audit.after(0);
    expect(entries.map((entry) => entry.id)).toEqual([1, 2, 3]);
    expect(entries[1]?.prevHash).toBe(entries[0]?.hash);
    expect(third.prevHash).toBe(entries[1]?.hash);
  });
});
