'use client';

import type { ApprovalEvent, OrderEvent, ReceiptEvent } from './chat-model';
import { formatCountdown, formatMoney, handedOverNotice, possessive, showSignedText } from './format';
import { SignedTerms } from './signed-terms';
import { SignedText } from './signed-text';
import { useNow } from './use-now';

const roles = ['child', 'parent'] as const;
/** Totals at or under this need only the child (SPEC §5.4). */
const childOnlyLimitCents = 1000;

/**
 * An invoice the shop signed, as the chat shows it: the terms decoded from the signed bytes, the
 * expiry countdown, and the approval tracker that fills live as the windows approve.
 */
export function OrderCard({
  order,
  approval,
  receipt,
  onOrderAgain,
}: {
  readonly order: OrderEvent;
  readonly approval?: ApprovalEvent | undefined;
  readonly receipt?: ReceiptEvent | undefined;
  readonly onOrderAgain: () => void;
}) {
  const status = approval?.status ?? 'pending';
  const open = receipt === undefined && (status === 'pending' || status === 'approved');
  const now = useNow(open);
  const left = Date.parse(order.expiresAt) - now;
  const expired = status === 'expired' || (open && status === 'pending' && left <= 0);
  const required = approval?.requiredRoles ?? (order.totalCents > childOnlyLimitCents ? roles : ['child']);
  const approved = approval?.approvedRoles ?? [];
  const stillNeeded = required.filter((role) => !approved.includes(role));
  const members = approval?.members ?? {};

  return (
    <article
      aria-label={`Order from ${showSignedText(order.merchantName)}`}
      className="rounded-xl border border-slate-200 bg-white p-4 shadow-sm"
    >
      <SignedTerms
        title={
          <h3 className="font-semibold">
            Order from <SignedText text={order.merchantName} />
          </h3>
        }
        merchantName={order.merchantName}
        merchantDid={order.merchantDid}
        items={order.items}
        totalCents={order.totalCents}
      />
      <dl className="mt-3 grid grid-cols-[auto_1fr] gap-x-3 gap-y-1 text-sm">
        <dt className="text-slate-600">Deliver to</dt>
        <dd>
          <SignedText text={order.deliverTo} />
        </dd>
        {open && (
          <>
            <dt className="text-slate-600">Offer expires</dt>
            <dd className="tabular-nums">{left > 0 ? `in ${formatCountdown(left)}` : 'now'}</dd>
          </>
        )}
      </dl>

      <section aria-label="Approvals" className="mt-3 rounded-lg bg-slate-50 p-3 text-sm">
        <ul className="flex flex-wrap gap-x-6 gap-y-1">
          {roles.map((role) => (
            <li key={role}>
              {members[role] === undefined ? (
                <span className="font-medium capitalize">{role}</span>
              ) : (
                <span className="font-medium">
                  <bdi>{members[role]}</bdi> ({role})
                </span>
              )}{' '}
              {role === 'parent' && approval?.allowance !== undefined ? (
                <span className="text-emerald-800">
                  covered by {members.parent === undefined ? "your parent's" : 'their'} allowance (
                  {formatMoney(approval.allowance.remainingCents)} left{' '}
                  {approval.allowance.period === 'day' ? 'today' : 'this week'})
                </span>
              ) : !required.includes(role) ? (
                <span className="text-slate-600">not needed under {formatMoney(childOnlyLimitCents)}</span>
              ) : approved.includes(role) ? (
                <span className="text-emerald-800">✓ approved</span>
              ) : (
                <span className="text-slate-600">○ waiting</span>
              )}
            </li>
          ))}
        </ul>
        <OrderStatus
          status={expired ? 'expired' : status}
          stillNeeded={stillNeeded}
          approval={approval}
          onOrderAgain={onOrderAgain}
        />
      </section>
    </article>
  );
}

function OrderStatus({
  status,
  stillNeeded,
  approval,
  onOrderAgain,
}: {
  readonly status: ApprovalEvent['status'];
  readonly stillNeeded: readonly ('child' | 'parent')[];
  readonly approval: ApprovalEvent | undefined;
  readonly onOrderAgain: () => void;
}) {
  switch (status) {
    case 'pending':
      if (approval === undefined) return <p className="mt-2 text-slate-700">Asking the household for approval…</p>;
      return (
        <ul className="mt-2 space-y-1">
          {approval.handover !== undefined && (
            <li className="text-slate-800">{handedOverNotice(approval.handover, approval.members?.parent)}</li>
          )}
          {stillNeeded.map((role) => (
            <li key={role} className="text-slate-800">
              Waiting for{' '}
              {approval.members?.[role] === undefined ? `the ${possessive(role)}` : `${approval.members[role]}'s`}{' '}
              passkey in the{' '}
              <a
                className="text-sky-800 underline underline-offset-2"
                href={approval.approveUrls[role] ?? `/approve?as=${role}`}
                target="_blank"
                rel="noreferrer"
              >
                {role} window
              </a>
              .
            </li>
          ))}
        </ul>
      );
    case 'approved':
      return <p className="mt-2 text-emerald-800">Approved ✓ — paying the shop now.</p>;
    case 'settled':
      return <p className="mt-2 text-emerald-800">Paid ✓ — asking the shop to deliver.</p>;
    case 'fulfilled':
      return <p className="mt-2 text-emerald-800">Paid ✓ — the shop signed its delivery commitment.</p>;
    case 'declined':
    case 'expired':
      return (
        <div className="mt-2 flex flex-wrap items-center gap-3">
          <p className="text-amber-900">
            {status === 'declined'
              ? `Declined${approval?.reason ? `: ${approval.reason}` : ''}. Nothing was charged.`
              : 'The offer expired before it was approved. Nothing was charged.'}
          </p>
          <button
            type="button"
            onClick={onOrderAgain}
            className="rounded-md border border-slate-300 bg-white px-3 py-1 font-medium hover:bg-slate-100"
          >
            Order again
          </button>
        </div>
      );
  }
}

/** The end of an order: what was paid, the reference, the ETA, and where to check the evidence. */
export function ReceiptCard({
  receipt,
  merchantName,
  fulfilled,
}: {
  readonly receipt: ReceiptEvent;
  readonly merchantName?: string | undefined;
  readonly fulfilled: boolean;
}) {
  return (
    <article aria-label="Receipt" className="rounded-xl border border-emerald-200 bg-emerald-50 p-4 text-sm shadow-sm">
      <h3 className="text-base font-semibold text-emerald-900">
        Paid {formatMoney(receipt.amountCents)}
        {merchantName ? ` to ${merchantName}` : ''}
      </h3>
      <dl className="mt-2 grid grid-cols-[auto_1fr] gap-x-3 gap-y-1">
        <dt className="text-slate-700">Payment reference</dt>
        <dd className="font-mono">{receipt.paymentRef}</dd>
        {receipt.etaMinutes !== undefined && (
          <>
            <dt className="text-slate-700">Arrives in</dt>
            <dd>about {receipt.etaMinutes} minutes</dd>
          </>
        )}
      </dl>
      {fulfilled && <p className="mt-2 text-emerald-900">Delivery commitment signed by the shop ✓</p>}
      <p className="mt-2">
        <a
          className="text-sky-800 underline underline-offset-2"
          href={`/audit/${encodeURIComponent(receipt.invoiceId)}`}
          target="_blank"
          rel="noreferrer"
        >
          See the evidence chain for this order
        </a>
      </p>
    </article>
  );
}
