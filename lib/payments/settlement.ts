import type { Allowances, Approvals, Household } from '../../identity/index';
import type { EventBus } from '../events';
import { PaymentError } from './payment-error';
import type { PaymentStore } from './payment-store';
import type { PaymentRail } from './rail';

/**
 * The rail's idempotency key: the invoice `jti`, and the attempt after a decline (a rail replays a
 * decline for the key it saw, so retrying a declined card needs the next key; an attempt in doubt
 * is always asked again under its own key, so it is never charged twice).
 */
export function idempotencyKeyOf(payment: { readonly invoiceId: string; readonly attempt: number }): string {
  return payment.attempt === 1 ? payment.invoiceId : `${payment.invoiceId}#${payment.attempt}`;
}

/** What `charge_invoice` asks settlement for: the call's own arguments, integer cents. */
export interface SettlementRequest {
  readonly invoiceId: string;
  readonly amountCents: number;
  readonly merchantId: string;
}

/** How a settlement ended. Only `succeeded` moved money; `unknown` is in doubt until resolved. */
export type SettlementOutcome =
  | {
      readonly status: 'succeeded';
      readonly invoiceId: string;
      readonly paymentRef: string;
      readonly amountCents: number;
      /** The `PaymentReceipt` JWT-VC, signed by the settlement service. */
      readonly receipt: string;
    }
  | { readonly status: 'declined'; readonly reason: string }
  | { readonly status: 'refused'; readonly reason: string }
  | { readonly status: 'unknown'; readonly reason: string };

/** The household's settlement service (SPEC §7). */
export interface Settlement {
  /** Charges an approved invoice once; a second charge for the same invoice returns the first receipt. */
  charge(request: SettlementRequest): Promise<SettlementOutcome>;
  /** Settles a payment in doubt by asking the rail again with the same idempotency key. */
  resolve(invoiceId: string): Promise<SettlementOutcome>;
  /** Resolves every payment left in doubt (run at start: a crash between the rail and the receipt). */
  resolveAll(): Promise<readonly SettlementOutcome[]>;
}

/** Options of {@link createSettlement}. */
export interface SettlementOptions {
  readonly household: Household;
  readonly approvals: Approvals;
  readonly payments: PaymentStore;
  readonly rail: PaymentRail;
  /**
   * The parent's standing allowances: an order the parent did not approve, for a child the parent
   * set an allowance for at that merchant, spends its budget before the rail is called.
   */
  readonly allowances?: Allowances;
  readonly events?: EventBus;
  readonly clock?: () => Date;
  /**
   * Longest wait for the rail's answer (default 20 s). Past it the payment is in doubt and the
   * caller hears `payment_in_progress`: a resolution never hangs on a rail that does not answer.
   */
  readonly railTimeoutMs?: number;
  /** Test hook: runs after the rail answered and before anything is recorded (a crash lands here). */
  readonly afterRailCharge?: (invoiceId: string) => void | Promise<void>;
}

/**
 * The settlement service: binds the charge to the approved request (amount, merchant, currency),
 * charges through the rail with the invoice `jti` as idempotency key, and issues the
 * `PaymentReceipt`. The policy has already decided by the time it runs; these bindings are the
 * household's second line, so a call the policy let through with other terms still charges nothing.
 */
export function createSettlement(options: SettlementOptions): Settlement {
  const { household, approvals, payments, rail } = options;
  const clock = options.clock ?? (() => new Date());
  const railTimeoutMs = options.railTimeoutMs ?? 20_000;
  const emit = (
    kind: string,
    outcome: 'ok' | 'deny' | 'error' | 'info',
    message: string,
    facts: { invoiceId: string; approvalId?: string; data?: Record<string, string | number> },
  ) =>
    options.events?.emit({
      source: 'payments',
      kind,
      outcome,
      orderId: facts.invoiceId,
      ...(facts.approvalId === undefined ? {} : { approvalId: facts.approvalId }),
      message,
      ...(facts.data === undefined ? {} : { data: facts.data }),
    });

  /** Calls the rail (again) for a payment row that is charging, and records what it answered. */
  async function attempt(invoiceId: string): Promise<SettlementOutcome> {
    const payment = await payments.get(invoiceId);
    if (!payment) return { status: 'refused', reason: `there is no payment for invoice ${invoiceId}` };
    if (payment.state === 'succeeded') return succeeded(payment.invoiceId);
    const record = await household.store.approvals.getByInvoice(invoiceId);
    if (!record) return { status: 'refused', reason: `there is no approval request for invoice ${invoiceId}` };
    let answer: Awaited<ReturnType<PaymentRail['charge']>>;
    try {
      answer = await withTimeout(
        (signal) =>
          rail.charge(
            {
              idempotencyKey: idempotencyKeyOf(payment),
              invoiceId,
              merchantId: payment.merchantId,
              amountCents: payment.amountCents,
              currency: payment.currency,
            },
            { signal },
          ),
        railTimeoutMs,
      );
      await options.afterRailCharge?.(invoiceId);
    } catch (error) {
      // The rail did not say: the money may have moved. The row stays `charging` (in doubt).
      const reason = error instanceof PaymentError ? error.message : 'the payment rail did not confirm the payment';
      emit('charge-in-doubt', 'error', `payment in doubt: ${reason}`, { invoiceId, approvalId: record.approvalId });
      return { status: 'unknown', reason: `payment_in_progress: ${reason}; do not pay again, ask again in a moment` };
    }
    const now = clock();
    if (answer.status === 'declined') {
      await payments.decline(invoiceId, { reason: answer.reason, now: now.getTime() });
      // Nothing was spent: the allowance's budget is freed for the retry or another order.
      await options.allowances?.release(invoiceId);
      emit('charge-declined', 'deny', `the rail declined: ${answer.reason}`, {
        invoiceId,
        approvalId: record.approvalId,
        data: { code: answer.code },
      });
      return { status: 'declined', reason: answer.reason };
    }
    // The receipt is issued once the rail said succeeded, and stored before anyone sees it.
    const receipt = await household.issue({
      signer: 'settlement',
      type: 'PaymentReceipt',
      subject: payment.merchantId,
      claims: {
        invoiceId,
        invoiceHash: record.invoiceHash,
        merchantId: payment.merchantId,
        amountCents: payment.amountCents,
        currency: payment.currency,
        paymentRef: answer.paymentRef,
        status: 'succeeded',
      },
      now,
    });
    await payments.succeed(invoiceId, { paymentRef: answer.paymentRef, receipt, now: now.getTime() });
    return succeeded(invoiceId);
  }

  /** The stored receipt, with the approval request moved to settled (idempotent). */
  async function succeeded(invoiceId: string): Promise<SettlementOutcome> {
    const payment = await payments.get(invoiceId);
    if (payment?.state !== 'succeeded' || !payment.receipt || !payment.paymentRef) {
      return { status: 'unknown', reason: 'payment_in_progress: the payment is still being confirmed' };
    }
    const settled = await approvals.settle({ approvalId: payment.approvalId, receipt: payment.receipt });
    if (settled.ok) {
      emit('receipt-issued', 'ok', `paid $${(payment.amountCents / 100).toFixed(2)}: ${payment.paymentRef}`, {
        invoiceId,
        approvalId: payment.approvalId,
        data: { amountCents: payment.amountCents, paymentRef: payment.paymentRef, rail: rail.name },
      });
    }
    return {
      status: 'succeeded',
      invoiceId,
      paymentRef: payment.paymentRef,
      amountCents: payment.amountCents,
      receipt: payment.receipt,
    };
  }

  /** Spends an order's amount on the child's allowance at its merchant; a refusal when it cannot. */
  async function holdAllowance(record: {
    readonly invoiceId: string;
    readonly approvalId: string;
    readonly merchantDid: string;
    readonly totalCents: number;
    readonly approvals: Readonly<Partial<Record<'child' | 'parent', string>>>;
  }): Promise<SettlementOutcome | undefined> {
    const allowances = options.allowances;
    if (allowances === undefined || record.approvals.parent !== undefined) return undefined;
    const order = { childDid: household.members.child, merchantDid: record.merchantDid, totalCents: record.totalCents };
    const cover = await allowances.cover(order);
    if (cover.status === 'none') return undefined;
    const held = await allowances.hold({ ...order, allowanceId: cover.allowanceId, invoiceId: record.invoiceId });
    if (held.ok) {
      emit(
        'allowance-spent',
        'info',
        `covered by the parent's allowance ($${(held.remainingCents / 100).toFixed(2)} left)`,
        {
          invoiceId: record.invoiceId,
          approvalId: record.approvalId,
          data: { allowanceId: cover.allowanceId, remainingCents: held.remainingCents },
        },
      );
      return undefined;
    }
    const why =
      held.reason === 'revoked'
        ? 'the parent revoked the allowance'
        : held.reason === 'over-budget'
          ? "the allowance's budget for this period is spent"
          : held.reason === 'not-covered'
            ? held.detail
            : 'the allowance is unknown';
    emit('allowance-refused', 'deny', `not charged: ${why}`, {
      invoiceId: record.invoiceId,
      approvalId: record.approvalId,
    });
    return { status: 'refused', reason: `${why}; the parent must approve this order` };
  }

  return {
    async charge(request) {
      // 1. An approval request for this invoice that the household approved.
      const record = await household.store.approvals.getByInvoice(request.invoiceId);
      if (!record)
        return { status: 'refused', reason: `there is no approval request for invoice ${request.invoiceId}` };
      if (!['approved', 'settled', 'fulfilled'].includes(record.status)) {
        return { status: 'refused', reason: `the order is ${record.status}, not approved` };
      }
      // 2. The call's terms are the approved terms: amount, merchant, currency.
      if (request.amountCents !== record.totalCents || request.merchantId !== record.merchantDid) {
        return { status: 'refused', reason: 'the amount or merchant is not the one the household approved' };
      }
      // 3. Without the parent's approval, an allowance the parent set for the child at this merchant
      //    stands in for it: its budget is spent here, in one transaction against its revocation,
      //    before the rail is called. The policy read the budget earlier; this hold is the spend,
      //    so of racing orders only those the budget holds are charged, and a revocation either
      //    came after the hold or refuses it.
      const held = await holdAllowance(record);
      if (held !== undefined) return held;
      // 4. One payment per invoice: a second charge finds the first.
      const { record: payment, created } = await payments.begin({
        invoiceId: record.invoiceId,
        approvalId: record.approvalId,
        merchantId: record.merchantDid,
        amountCents: record.totalCents,
        currency: 'usd',
        createdAt: clock().getTime(),
      });
      if (payment.state === 'succeeded') return succeeded(payment.invoiceId);
      if (payment.state === 'declined' && !(await payments.retry(payment.invoiceId, clock().getTime()))) {
        return { status: 'unknown', reason: 'payment_in_progress: another attempt is being made' };
      }
      if (created) {
        emit('charge-started', 'info', `charging $${(record.totalCents / 100).toFixed(2)} on the ${rail.name} rail`, {
          invoiceId: record.invoiceId,
          approvalId: record.approvalId,
          data: { amountCents: record.totalCents, rail: rail.name },
        });
      }
      // 5. The rail, with the invoice jti as idempotency key: a charge in doubt is asked again, never doubled.
      return attempt(payment.invoiceId);
    },

    resolve: (invoiceId) => attempt(invoiceId),

    async resolveAll() {
      const outcomes: SettlementOutcome[] = [];
      for (const payment of await payments.listCharging()) outcomes.push(await attempt(payment.invoiceId));
      return outcomes;
    },
  };
}

/** Runs a rail call with an abort signal, and stops waiting at the deadline even if the rail ignores it. */
async function withTimeout<T>(run: (signal: AbortSignal) => Promise<T>, timeoutMs: number): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new PaymentError('rail-timeout', `the payment rail did not answer within ${timeoutMs / 1000} s`));
    }, timeoutMs);
  });
  try {
    return await Promise.race([run(controller.signal), deadline]);
  } finally {
    clearTimeout(timer);
  }
}
