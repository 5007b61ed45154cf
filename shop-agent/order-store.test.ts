import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type OrderStore, openOrderStore } from './order-store.js';

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const step of cleanup.splice(0).reverse()) step();
});
const openTemp = (): { path: string; open: () => OrderStore } => {
  const folder = mkdtempSync(join(tmpdir(), 'shop-orders-'));
  cleanup.push(() => rmSync(folder, { recursive: true, force: true }));
  const path = join(folder, 'orders.sqlite');
  return {
    path,
    open: () => {
      const store = openOrderStore(path);
      cleanup.push(() => store.close());
      return store;
    },
  };
};
const order = {
  nonce: 'urn:uuid:1',
  invoice: 'a.b.c',
  totalCents: 400,
  currency: 'usd',
  deliverTo: '12 Main St',
  items: [{ sku: 'cheese-slice', qty: 1 }],
  createdAt: 1,
};

describe('openOrderStore', () => {
  it('stores invoiced orders and reads them back, persisting across reopen', () => {
    const temp = openTemp();
    temp.open().insertInvoiced(order);
    const reopened = temp.open();
    expect(reopened.get('urn:uuid:1')).toEqual({
      ...order,
      status: 'invoiced',
      fulfilledAt: null,
      paymentRef: null,
      commitment: null,
      cancelledAt: null,
    });
    expect(reopened.get('urn:uuid:2')).toBeUndefined();
    expect(reopened.count()).toBe(1);
  });

  it('refuses a duplicate nonce', () => {
    const store = openTemp().open();
    store.insertInvoiced(order);
    expect(() => store.insertInvoiced(order)).toThrow();
  });

  it('marks an order fulfilled exactly once, even from two connections', () => {
    const temp = openTemp();
    const a = temp.open();
    const b = temp.open();
    a.insertInvoiced(order);
    const fulfilment = { nonce: order.nonce, paymentRef: 'p1', commitment: 'x.y.z', fulfilledAt: 2 };
    // Both connections saw `invoiced`; only one UPDATE can win.
    expect(a.get(order.nonce)?.status).toBe('invoiced');
    expect(b.get(order.nonce)?.status).toBe('invoiced');
    const results = [a.markFulfilled(fulfilment), b.markFulfilled({ ...fulfilment, paymentRef: 'p2' })];
    expect(results).toEqual([true, false]);
    expect(b.get(order.nonce)).toMatchObject({ status: 'fulfilled', paymentRef: 'p1', fulfilledAt: 2 });
    expect(a.markFulfilled({ ...fulfilment, nonce: 'urn:uuid:unknown' })).toBe(false);
  });
});
