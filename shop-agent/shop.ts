import { decodeJwt } from 'jose';
import type { Clerk } from './clerk.js';
import { type DidDocument, didDocument } from './did-document.js';
import type { MerchantKey } from './key-store.js';
import { MENU, type MenuItem } from './menu.js';
import type { OrderStore, StoredOrder } from './order-store.js';
import {
  CURRENCY,
  checkPolicyFloor,
  floorPriceCents,
  type InvoiceLine,
  MAX_QTY,
  MAX_TOTAL_CENTS,
  type RequestedLine,
  type Terms,
  type Violation,
} from './policy-floor.js';
import { ShopError } from './shop-error.js';
import { signCredential } from './sign-credential.js';
import { checkTimeClaims, MAX_LIFETIME_SECONDS } from './time-claims.js';
import { firstAmbiguousCharacter } from './unambiguous-text.js';
import { invoiceHash, verifyReceipt } from './verify-receipt.js';

/** Invoice lifetime: the household must pay within five minutes (SPEC §6). */
export const INVOICE_TTL_SECONDS = MAX_LIFETIME_SECONDS.Invoice;
/** Commitment lifetime: long enough for the household to record it in its audit chain. */
export const COMMITMENT_TTL_SECONDS = 86_400;
/** The promised delivery time. */
export const ETA_MINUTES = 30;

/** Structured event sink (stderr in production, an array in tests). */
export type ShopLog = (event: string, fields: Record<string, unknown>) => void;

/** Everything the shop needs, wired by the composition root. */
export type ShopOptions = {
  key: MerchantKey;
  orders: OrderStore;
  clerk: Clerk;
  merchantName: string;
  /** The one settlement did:key whose receipts ship pizza; undefined refuses every fulfil. */
  settlementDid: string | undefined;
  menu?: readonly MenuItem[];
  now?: () => Date;
  log?: ShopLog;
};

/** An expected outcome: the value, or a refusal the caller can act on. */
export type ShopOutcome<T> = { ok: true; value: T } | { ok: false; reason: string; violations?: Violation[] };

/** The public menu with the shop's rules, so a caller can ask for something signable. */
export type MenuView = {
  merchantId: string;
  merchantName: string;
  currency: typeof CURRENCY;
  items: { sku: string; name: string; listPriceCents: number; lowestPriceCents: number }[];
  rules: string[];
};

/** A non-binding proposal: floor-clamped terms plus the clerk's words. */
export type Negotiation = {
  clerk: 'anthropic' | 'deterministic';
  clerkMessage: string;
  proposal: Terms;
  adjustedToPolicy: boolean;
  note: string;
};

/** A signed invoice and the terms it carries. */
export type IssuedInvoice = { invoice: string; invoiceId: string; terms: Terms; deliverTo: string; expiresAt: string };

/** A signed fulfilment commitment. */
export type IssuedCommitment = { commitment: string; invoiceId: string; etaMinutes: number };

/** What `cancel_order` did: the order is cancelled, and whether it had been paid. */
export type CancelledOrder = { invoiceId: string; cancelled: true; wasPaid: boolean; note: string };

/** The merchant's card: who signs the shop's credentials. */
export type MerchantCard = { did: string; name: string; didDocument: DidDocument };

/** The pizza shop's behaviour, independent of transport (the MCP server adapts it). */
export type Shop = {
  menu(): MenuView;
  card(): MerchantCard;
  negotiate(request: {
    message: string;
    items?: readonly RequestedLine[] | undefined;
  }): Promise<ShopOutcome<Negotiation>>;
  requestInvoice(request: {
    items: readonly RequestedLine[];
    deliverTo: string;
    totalCents?: number | undefined;
    currency?: string | undefined;
  }): Promise<ShopOutcome<IssuedInvoice>>;
  fulfil(request: { receipt: string }): Promise<ShopOutcome<IssuedCommitment>>;
  /** Cancels an order of this shop that is not delivered yet, or says clearly why it cannot. */
  cancel(request: { invoiceId: string; reason?: string | undefined }): ShopOutcome<CancelledOrder>;
};

/**
 * Build the shop: the clerk talks, the policy floor decides, the merchant key signs, the
 * order store remembers. Refusals are values; only faults throw.
 */
export function createShop(options: ShopOptions): Shop {
  const menu = options.menu ?? MENU;
  const now = options.now ?? (() => new Date());
  const log: ShopLog = options.log ?? (() => {});
  const { key, orders } = options;
  // The merchant name is signed into every invoice: it must read as it is, like every signed text.
  const nameCharacter = firstAmbiguousCharacter(options.merchantName);
  if (nameCharacter !== undefined) {
    throw new ShopError('config', `the merchant name contains ${nameCharacter}, an invisible or control character`);
  }

  return {
    menu() {
      return {
        merchantId: key.did,
        merchantName: options.merchantName,
        currency: CURRENCY,
        items: menu.map((item) => ({
          sku: item.sku,
          name: item.name,
          listPriceCents: item.listPriceCents,
          lowestPriceCents: floorPriceCents(item.listPriceCents),
        })),
        rules: [
          'Prices are in US cents. Unit prices are signed only between lowestPriceCents and listPriceCents.',
          `Quantity per line is a whole number from 1 to ${MAX_QTY}; an order totals at most ${MAX_TOTAL_CENTS} cents.`,
          'deliverTo is plain text: no control, invisible format (e.g. bidirectional override) or line/paragraph separator characters.',
          'negotiate proposes terms (not binding); request_invoice returns the signed invoice.',
        ],
      };
    },

    card() {
      return { did: key.did, name: options.merchantName, didDocument: didDocument(key) };
    },

    async negotiate(request) {
      // The requested lines must be signable at list price before the clerk sees them.
      const items = request.items ?? [];
      const checked = checkPolicyFloor({ items: items.map(({ sku, qty }) => ({ sku, qty })) }, menu);
      if (!checked.ok && items.length > 0) {
        return { ok: false, reason: 'These items cannot be quoted.', violations: checked.violations };
      }
      const lines = checked.ok ? checked.terms.items : [];
      const proposal = await options.clerk.propose({ message: request.message, lines });
      if (proposal.fallbackReason !== undefined) log('clerk-fallback', { reason: proposal.fallbackReason });

      // The clerk only proposes: clamp each price into [floor, list] so the proposal is signable.
      let adjustedToPolicy = false;
      const proposed: InvoiceLine[] = lines.map((line) => {
        const asked = proposal.prices.find((price) => price.sku === line.sku)?.unitPriceCents ?? line.listPriceCents;
        const clamped = Math.min(line.listPriceCents, Math.max(floorPriceCents(line.listPriceCents), asked));
        if (clamped !== asked) adjustedToPolicy = true;
        return { ...line, unitPriceCents: clamped };
      });
      const totalCents = proposed.reduce((sum, line) => sum + line.qty * line.unitPriceCents, 0);
      log('negotiation-proposed', { clerk: proposal.clerk, totalCents, adjustedToPolicy });
      return {
        ok: true,
        value: {
          clerk: proposal.clerk,
          clerkMessage: proposal.reply.slice(0, 2000),
          proposal: { items: proposed, totalCents, currency: CURRENCY },
          adjustedToPolicy,
          note: adjustedToPolicy
            ? "The clerk's offer was outside the shop's policy; prices were adjusted to the nearest signable price. Nothing is binding until request_invoice signs it."
            : 'Nothing is binding until request_invoice signs it: pass these items with their unitPriceCents.',
        },
      };
    },

    async requestInvoice(request) {
      // Step 1: the policy floor decides (prices, quantities, total, and that the address and
      // names read as they are); a violation signs and stores nothing.
      const decision = checkPolicyFloor(request, menu);
      if (!decision.ok) {
        log('invoice-refused', { violations: decision.violations.map((violation) => violation.code) });
        return {
          ok: false,
          reason: 'The order is outside the shop policy; no invoice was issued.',
          violations: decision.violations,
        };
      }
      const { terms } = decision;
      // Step 2: sign the invoice JWT-VC; its jti is the order's single-use nonce.
      const issuedAt = now();
      const signed = await signCredential(key, {
        type: 'Invoice',
        subject: {
          merchantId: key.did,
          merchantName: options.merchantName,
          items: terms.items,
          totalCents: terms.totalCents,
          currency: terms.currency,
          deliverTo: request.deliverTo,
        },
        ttlSeconds: INVOICE_TTL_SECONDS,
        now: issuedAt,
      });
      // Step 3: store the order (status invoiced) before the invoice leaves the shop.
      orders.insertInvoiced({
        nonce: signed.jti,
        invoice: signed.jws,
        totalCents: terms.totalCents,
        currency: terms.currency,
        deliverTo: request.deliverTo,
        items: terms.items,
        createdAt: issuedAt.getTime(),
      });
      log('invoice-issued', { invoiceId: signed.jti, totalCents: terms.totalCents });
      return {
        ok: true,
        value: {
          invoice: signed.jws,
          invoiceId: signed.jti,
          terms,
          deliverTo: request.deliverTo,
          expiresAt: signed.expiresAt.toISOString(),
        },
      };
    },

    async fulfil(request) {
      const refuse = (reason: string): ShopOutcome<IssuedCommitment> => {
        log('fulfilment-refused', { reason });
        return { ok: false, reason };
      };
      // An order already moved: its stored commitment again for the payment that shipped it, else refused.
      const repeated = (stored: StoredOrder, paymentRef: string): ShopOutcome<IssuedCommitment> => {
        if (stored.cancelledAt !== null) return refuse('Receipt refused: this order was cancelled.');
        if (stored.status !== 'fulfilled' || stored.commitment === null || stored.paymentRef !== paymentRef) {
          return refuse('Receipt refused: this order was already fulfilled.');
        }
        log('fulfilment-repeated', { invoiceId: stored.nonce, paymentRef });
        return { ok: true, value: { commitment: stored.commitment, invoiceId: stored.nonce, etaMinutes: ETA_MINUTES } };
      };
      // Step 1: without a configured settlement DID nobody can be trusted to say "paid".
      if (options.settlementDid === undefined) {
        return refuse(
          'The shop has no trusted settlement service configured (SHOP_SETTLEMENT_DID), so it cannot ship any order.',
        );
      }
      // Step 2: the receipt is a PaymentReceipt signed by that settlement DID, status succeeded.
      const at = now();
      const verification = await verifyReceipt(request.receipt, { settlementDid: options.settlementDid, now: at });
      if (!verification.verified) return refuse(`Receipt refused: ${verification.reason}.`);
      const receipt = verification.subject;
      // Step 3: it pays this merchant.
      if (receipt.merchantId !== key.did) return refuse('Receipt refused: it pays a different merchant.');
      // Step 4: for a nonce this shop issued.
      const order = orders.get(receipt.invoiceId);
      if (order === undefined) return refuse('Receipt refused: this shop never issued that invoice.');
      // Step 5: not fulfilled yet (re-checked atomically in step 10), unless by this very payment:
      // a fulfilment asked again (a retry, a turn taken over by another instance) gets the stored
      // commitment back and ships nothing more (SPEC §10.10).
      if (order.status !== 'invoiced') return repeated(order, receipt.paymentRef);
      // Step 6: the invoice was within its own window (SPEC §5.2) when it was paid: an expired
      // invoice's terms bind nobody, so the payment must have been made inside them. The receipt's
      // `iat` is the payment's time (settlement issues it as the rail answers); a paid order is
      // fulfilled even once the offer has since expired. The stored bytes are the shop's own.
      const paidAt = new Date(Math.min(verification.issuedAt.getTime(), at.getTime()));
      const invoiceWindow = invoiceTimeClaims(order.invoice, paidAt);
      if (!invoiceWindow.ok) {
        return refuse(
          `Receipt refused: the invoice it pays has expired or is not usable (${invoiceWindow.reason}); request a new invoice.`,
        );
      }
      // Step 7: the amount and currency paid are exactly the invoice's.
      if (receipt.amountCents !== order.totalCents) {
        return refuse(
          `Receipt refused: it pays ${receipt.amountCents} cents but the invoice is for ${order.totalCents} cents.`,
        );
      }
      if (receipt.currency !== order.currency) {
        return refuse(`Receipt refused: it pays in "${receipt.currency}" but the invoice is in "${order.currency}".`);
      }
      // Step 8: it is bound to the exact invoice bytes this shop signed.
      if (receipt.invoiceHash !== invoiceHash(order.invoice)) {
        return refuse('Receipt refused: its invoiceHash does not match the invoice this shop issued.');
      }
      // Step 9: sign the commitment to deliver.
      const signed = await signCredential(key, {
        type: 'FulfilmentCommitment',
        subject: {
          invoiceId: order.nonce,
          items: order.items,
          deliverTo: order.deliverTo,
          paymentRef: receipt.paymentRef,
          etaMinutes: ETA_MINUTES,
        },
        ttlSeconds: COMMITMENT_TTL_SECONDS,
        now: at,
      });
      // Step 10: spend the nonce atomically; a concurrent fulfil that lost the race ships nothing.
      const won = orders.markFulfilled({
        nonce: order.nonce,
        paymentRef: receipt.paymentRef,
        commitment: signed.jws,
        fulfilledAt: at.getTime(),
      });
      if (!won) {
        const now = orders.get(order.nonce);
        return now === undefined
          ? refuse('Receipt refused: this order was already fulfilled.')
          : repeated(now, receipt.paymentRef);
      }
      log('order-fulfilled', { invoiceId: order.nonce, paymentRef: receipt.paymentRef });
      return { ok: true, value: { commitment: signed.jws, invoiceId: order.nonce, etaMinutes: ETA_MINUTES } };
    },

    cancel(request) {
      const refuse = (reason: string): ShopOutcome<CancelledOrder> => {
        log('cancel-refused', { invoiceId: request.invoiceId, reason });
        return { ok: false, reason };
      };
      // 1. An order this shop signed, not cancelled yet.
      const order = orders.get(request.invoiceId);
      if (order === undefined) return refuse(`Not cancelled: this shop has no order ${request.invoiceId}.`);
      if (order.cancelledAt !== null) return refuse('Not cancelled: this order was already cancelled.');
      // 2. Not delivered: invoiced, or shipped with the promised delivery time still ahead.
      const at = now().getTime();
      const etaMs = ETA_MINUTES * 60 * 1000;
      if (order.status === 'fulfilled' && order.fulfilledAt !== null && order.fulfilledAt + etaMs <= at) {
        return refuse('Not cancelled: this order was already delivered.');
      }
      // 3. Cancelled atomically: a concurrent cancel or a delivery that lands first wins.
      if (!orders.markCancelled({ nonce: order.nonce, at, etaMs })) {
        return refuse('Not cancelled: the order changed while cancelling (cancelled or delivered); look again.');
      }
      const wasPaid = order.status === 'fulfilled';
      log('order-cancelled', { invoiceId: order.nonce, wasPaid });
      return {
        ok: true,
        value: {
          invoiceId: order.nonce,
          cancelled: true,
          wasPaid,
          note: wasPaid
            ? `The delivery is stopped. The payment ${order.paymentRef ?? ''} is not refunded automatically: the shop refunds it on request.`
            : 'The invoice will not be fulfilled; nothing was paid.',
        },
      };
    },
  };
}

/** The time-claim verdict on an invoice this shop signed and stored (a malformed one is refused). */
function invoiceTimeClaims(invoice: string, now: Date): ReturnType<typeof checkTimeClaims> {
  let payload: Record<string, unknown>;
  try {
    payload = decodeJwt(invoice);
  } catch {
    return { ok: false, reason: 'the stored invoice cannot be read' };
  }
  return checkTimeClaims(payload, { now, maxLifetimeSeconds: MAX_LIFETIME_SECONDS.Invoice });
}
