import type {
  Allowances,
  ApprovalHandoverCause,
  ApprovalRecord,
  Approvals,
  Household,
  Role,
} from '../../identity/index';
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
  /**
   * Not charged: the order was approved on the parent's standing allowance alone, which no longer
   * covers it, so the same approval request now waits for `waitingFor` (the parent). Once they
   * approved, the same charge by reference pays it with both approvals.
   */
  | {
      readonly status: 'waiting';
      readonly approvalId: string;
      readonly waitingFor: readonly Role[];
      readonly reason: string;
    }
  | { readonly status: 'unknown'; readonly reason: string };

/** The household's settlement service (SPEC §7). */
export interface Settlement {
  /** Charges an approved invoice once; a second charge for the same invoice returns the first receipt. */
  charge(request: SettlementRequest): Promise<SettlementOutcome>;
  /** Settles a payment in doubt by asking the rail again with the same idempotency key. */
  resolve(invoiceId: string): Promise<SettlementOutcome>;
  /** Resolves every payment left in doubt (run at start: a crash between the rail and the receipt). */
  resolveAll(): Promise<readonly SettlementOutcome[]>;
  /**
   * Asked before the policy decides a charge: an order the household approved on the parent's
   * standing allowance alone that the allowance no longer covers (revoked, its period's budget
   * spent, ended: read now) is handed to the parent, and the answer is `waiting`; so is an order
   * already handed over that the parent has not approved yet. `undefined` otherwise: the policy
   * and the charge's hold decide. Without this, the policy refuses such an order on the child's
   * approval alone and the request, already approved, never reaches the parent.
   */
  handOverUncovered(invoiceId: string): Promise<SettlementOutcome | undefined>;
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

  /**
   * Spends an order's amount on the child's allowance at its merchant. When it cannot, nothing is
   * charged and the order is handed to the parent: `waiting` for the parent, or a refusal.
   */
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
    const cause =
      held.reason === 'revoked' ? 'revoked' : held.reason === 'over-budget' ? 'budget-spent' : 'not-covered';
    const why =
      cause !== 'not-covered'
        ? handoverWhy[cause]
        : held.reason === 'not-covered'
          ? held.detail
          : 'the allowance is unknown';
    const handed = await handToParent(record, {
      cause,
      allowanceId: cover.allowanceId,
      ...(held.period === undefined ? {} : { period: held.period }),
      why,
    });
    return handed ?? { status: 'refused', reason: `${why}; the parent must approve this order` };
  }

  /**
   * Whether an order is paid on the allowance or the rail, or being paid: it holds budget, or its
   * payment is charging or succeeded. Such an order is never handed over (a retry racing its own
   * charge must not send a paid order to the parent). A declined payment freed its hold: not paid.
   */
  async function paidOrPaying(invoiceId: string): Promise<boolean> {
    if ((await options.allowances?.holdOf(invoiceId)) !== undefined) return true;
    const payment = await payments.get(invoiceId);
    return payment !== undefined && payment.state !== 'declined';
  }

  /**
   * The order the allowance no longer covers goes to the parent: the refusal is recorded, and the
   * same approval request handed over once (of racing refusals the store's compare-and-set lets one
   * hand it over), keeping the child's approval and the invoice's expiry. It is never charged on
   * the child's approval alone: until the parent approved, every charge of it is answered `waiting`
   * (or refused) before the rail. `undefined`, and nothing recorded, for an order paid or being
   * paid (its own hold counted in the spend that refused it: a retry racing its charge).
   */
  async function handToParent(
    record: { readonly approvalId: string; readonly invoiceId: string },
    refusal: {
      readonly cause: ApprovalHandoverCause;
      readonly allowanceId: string;
      readonly period?: 'day' | 'week';
      readonly why: string;
    },
  ): Promise<SettlementOutcome | undefined> {
    const { approvalId, invoiceId } = record;
    const { why, ...handover } = refusal;
    const refused: SettlementOutcome = { status: 'refused', reason: `${why}; the parent must approve this order` };
    if (await paidOrPaying(invoiceId)) return undefined;
    emit('allowance-refused', 'deny', `not charged: ${why}`, { invoiceId, approvalId });
    const handed = await approvals.handToParent({ approvalId, ...handover });
    // The loser of a race reads the winner's hand-over: it waits for the parent all the same.
    const now = handed.ok ? handed.record : await household.store.approvals.get(approvalId);
    return now === undefined ? refused : (waitingFor(now, why) ?? refused);
  }

  /** `waiting` for a request handed to the parent that still waits for someone; `undefined` otherwise. */
  function waitingFor(record: ApprovalRecord, why: string): SettlementOutcome | undefined {
    const waiting = record.requiredRoles.filter((role) => record.approvals[role] === undefined);
    if (record.status !== 'pending' || record.handover === undefined || waiting.length === 0) return undefined;
    return {
      status: 'waiting',
      approvalId: record.approvalId,
      waitingFor: waiting,
      reason: `${why}; nothing was charged, and the order now waits for the parent's approval`,
    };
  }

  return {
    async charge(request) {
      // 1. An approval request for this invoice that the household approved.
      const record = await household.store.approvals.getByInvoice(request.invoiceId);
      if (!record)
        return { status: 'refused', reason: `there is no approval request for invoice ${request.invoiceId}` };
      // A request handed to the parent waits for the parent: never charged on the child's approval alone.
      const handedOver =
        record.handover === undefined ? undefined : waitingFor(record, handoverWhy[record.handover.cause]);
      if (handedOver !== undefined) return handedOver;
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
      //    came after the hold or refuses it. A refused hold hands the order to the parent.
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

    async handOverUncovered(invoiceId) {
      const allowances = options.allowances;
      const record = await household.store.approvals.getByInvoice(invoiceId);
      if (allowances === undefined || record === undefined) return undefined;
      // 1. Already handed over and not yet decided by the parent: it waits, as it did.
      const cause = record.handover?.cause;
      if (cause !== undefined) return waitingFor(record, handoverWhy[cause]);
      // 2. Only an unexpired order the household approved on the child's approval alone (the policy
      //    refuses an expired invoice as it always did).
      if (record.status !== 'approved' || record.approvals.parent !== undefined) return undefined;
      if (record.expiresAt <= clock().getTime()) return undefined;
      // 3. Whether the child's allowance at its merchant covers it now (read; the hold is the spend).
      const cover = await allowances.cover({
        childDid: household.members.child,
        merchantDid: record.merchantDid,
        totalCents: record.totalCents,
      });
      if (cover.status !== 'not-covered') return undefined;
      // 4. Handed over; but an order paid or being paid goes on, and the policy and the charge
      //    answer it with its payment, as any charge asked again.
      return handToParent(record, {
        cause: cover.cause,
        allowanceId: cover.allowanceId,
        ...(cover.period === undefined ? {} : { period: cover.period }),
        why: cover.reason,
      });
    },

    async resolveAll() {
      const outcomes: SettlementOutcome[] = [];
      for (const payment of await payments.listCharging()) outcomes.push(await attempt(payment.invoiceId));
      return outcomes;
    },
  };
}

/** Why a request was handed to the parent, for a charge asked again before the parent decided. */
const handoverWhy = {
  'budget-spent': "the allowance's budget for this period is spent",
  revoked: 'the parent revoked the allowance',
  'not-covered': 'the allowance does not cover this order',
} as const satisfies Record<ApprovalHandoverCause, string>;

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
