import Database from 'better-sqlite3';
import { z } from 'zod';
import { ShopError } from './shop-error.js';

/** An order's lifecycle at the shop: signed invoice issued, then fulfilled once. */
export type OrderStatus = 'invoiced' | 'fulfilled';

/** What the shop remembers about an order it signed. */
export type StoredOrder = {
  nonce: string;
  invoice: string;
  totalCents: number;
  currency: string;
  deliverTo: string;
  items: unknown[];
  status: OrderStatus;
  createdAt: number;
  fulfilledAt: number | null;
  paymentRef: string | null;
  /** The signed commitment to deliver, once fulfilled: what a fulfilment asked again returns. */
  commitment: string | null;
  /** When the household cancelled it (`cancel_order`); a cancelled order is never fulfilled. */
  cancelledAt: number | null;
};

/** A new order, recorded only after its invoice was signed. */
export type NewOrder = Pick<
  StoredOrder,
  'nonce' | 'invoice' | 'totalCents' | 'currency' | 'deliverTo' | 'items' | 'createdAt'
>;

/** The fulfilment to record against an invoiced order. */
export type Fulfilment = { nonce: string; paymentRef: string; commitment: string; fulfilledAt: number };

/**
 * The shop's order store. Behind an interface so the shop's logic never depends on SQLite;
 * `markFulfilled` is the single-use gate and must be atomic across processes.
 */
export interface OrderStore {
  /** Record a freshly signed invoice (status `invoiced`). */
  insertInvoiced(order: NewOrder): void;
  /** The order for a nonce, or undefined when this shop never issued it. */
  get(nonce: string): StoredOrder | undefined;
  /** Move `invoiced → fulfilled` unless cancelled; true only for the one call that made the move. */
  markFulfilled(fulfilment: Fulfilment): boolean;
  /**
   * Cancels an order that is not cancelled and not delivered by `at` (invoiced, or fulfilled with
   * `fulfilledAt + etaMs` still ahead); true only for the one call that cancelled it.
   */
  markCancelled(request: { nonce: string; at: number; etaMs: number }): boolean;
  /** How many orders exist (tests assert refusals store nothing). */
  count(): number;
  close(): void;
}

const Row = z.object({
  nonce: z.string(),
  invoice: z.string(),
  total_cents: z.number().int(),
  currency: z.string(),
  deliver_to: z.string(),
  items: z.string(),
  status: z.enum(['invoiced', 'fulfilled']),
  created_at: z.number().int(),
  fulfilled_at: z.number().int().nullable(),
  payment_ref: z.string().nullable(),
  commitment: z.string().nullable(),
  cancelled_at: z.number().int().nullable(),
});

/**
 * Open (creating if needed) the SQLite order store at `path`, in WAL mode with a busy timeout
 * so a second process sharing the file waits instead of failing.
 */
export function openOrderStore(path: string): OrderStore {
  let db: Database.Database;
  try {
    db = new Database(path);
    db.pragma('journal_mode = WAL');
    db.pragma('busy_timeout = 5000');
    db.exec(`CREATE TABLE IF NOT EXISTS orders (
      nonce TEXT PRIMARY KEY,
      invoice TEXT NOT NULL,
      total_cents INTEGER NOT NULL,
      currency TEXT NOT NULL,
      deliver_to TEXT NOT NULL,
      items TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('invoiced', 'fulfilled')),
      created_at INTEGER NOT NULL,
      fulfilled_at INTEGER,
      payment_ref TEXT,
      commitment TEXT
    )`);
    // Files made before cancel_order get the column once.
    const columns = z.array(z.object({ name: z.string() })).parse(db.prepare('PRAGMA table_info(orders)').all());
    if (!columns.some((column) => column.name === 'cancelled_at')) {
      db.exec('ALTER TABLE orders ADD COLUMN cancelled_at INTEGER');
    }
  } catch (error) {
    throw new ShopError('order-store', `cannot open the order store at ${path}`, { cause: error });
  }
  const insert = db.prepare(
    `INSERT INTO orders (nonce, invoice, total_cents, currency, deliver_to, items, status, created_at)
     VALUES (@nonce, @invoice, @totalCents, @currency, @deliverTo, @items, 'invoiced', @createdAt)`,
  );
  const select = db.prepare(
    'SELECT nonce, invoice, total_cents, currency, deliver_to, items, status, created_at, fulfilled_at, payment_ref, commitment, cancelled_at FROM orders WHERE nonce = ?',
  );
  // The status guard in WHERE makes check-and-set one statement: atomic, even across processes.
  const fulfil = db.prepare(
    `UPDATE orders SET status = 'fulfilled', fulfilled_at = @fulfilledAt, payment_ref = @paymentRef, commitment = @commitment
     WHERE nonce = @nonce AND status = 'invoiced' AND cancelled_at IS NULL`,
  );
  // One statement again: not cancelled, and not delivered at @at, checked and written together.
  const cancel = db.prepare(
    `UPDATE orders SET cancelled_at = @at
     WHERE nonce = @nonce AND cancelled_at IS NULL
       AND (status = 'invoiced' OR (status = 'fulfilled' AND fulfilled_at + @etaMs > @at))`,
  );
  const countAll = db.prepare('SELECT COUNT(*) AS n FROM orders');

  return {
    insertInvoiced(order) {
      insert.run({ ...order, items: JSON.stringify(order.items) });
    },
    get(nonce) {
      const raw = select.get(nonce);
      if (raw === undefined) return undefined;
      const row = Row.parse(raw);
      return {
        nonce: row.nonce,
        invoice: row.invoice,
        totalCents: row.total_cents,
        currency: row.currency,
        deliverTo: row.deliver_to,
        items: z.array(z.unknown()).parse(JSON.parse(row.items)),
        status: row.status,
        createdAt: row.created_at,
        fulfilledAt: row.fulfilled_at,
        paymentRef: row.payment_ref,
        commitment: row.commitment,
        cancelledAt: row.cancelled_at,
      };
    },
    markFulfilled(fulfilment) {
      return fulfil.run(fulfilment).changes === 1;
    },
    markCancelled(request) {
      return cancel.run(request).changes === 1;
    },
    count() {
      return z.object({ n: z.number() }).parse(countAll.get()).n;
    },
    close() {
      db.close();
    },
  };
}
