'use client';

import {
  formatCountdown,
  formatMoney,
  type Handover,
  handedOverNotice,
  handoverReason,
  type MemberNames,
  showSignedText,
} from './format';
import { SignedTerms } from './signed-terms';
import { hasHiddenCharacters, SignedText } from './signed-text';
import { useNow } from './use-now';

type Role = 'child' | 'parent';

/** A request as the pending route sends it: the terms decoded from the merchant-signed invoice. */
export interface PendingApproval {
  readonly approvalId: string;
  readonly status: string;
  readonly terms: {
    readonly invoiceId: string;
    readonly merchantId: string;
    readonly merchantName: string;
    readonly items: ReadonlyArray<{ readonly name: string; readonly qty: number; readonly unitPriceCents: number }>;
    readonly totalCents: number;
    readonly deliverTo: string;
  };
  readonly requiredRoles: readonly Role[];
  readonly approvedRoles: readonly Role[];
  readonly expiresAt: string;
  /** The parent's standing allowance that stands in for the parent on this order. */
  readonly allowance?: { readonly period: 'day' | 'week'; readonly remainingCents: number };
  /** What the household calls its members (set in the parent's window). */
  readonly members?: MemberNames;
  /** Approved on the parent's allowance alone, which no longer covered it at the charge: it asks the parent now. */
  readonly handover?: Handover;
}

/**
 * One request in the approval window. Approve is offered only while the request is pending, not
 * expired, and not yet approved by this role; expired or closed requests say so instead.
 * Merchant-supplied text is rendered as text, with any hidden character as a visible escape.
 */
export function PendingApprovalCard({
  approval,
  role,
  busy,
  closed,
  onApprove,
  onDecline,
  onDismiss,
}: {
  readonly approval: PendingApproval;
  readonly role: Role;
  readonly busy: boolean;
  readonly closed?: 'declined-here' | 'gone';
  readonly onApprove?: () => void;
  readonly onDecline?: () => void;
  readonly onDismiss?: () => void;
}) {
  const { terms } = approval;
  const now = useNow(closed === undefined);
  const left = Date.parse(approval.expiresAt) - now;
  const expired = left <= 0;
  const approvedHere = approval.approvedRoles.includes(role);
  const others = approval.requiredRoles.filter((other) => other !== role);
  const actionable = closed === undefined && !expired && !approvedHere;
  const hidden = [terms.merchantName, terms.deliverTo, ...terms.items.map((item) => item.name)].some(
    hasHiddenCharacters,
  );
  const members = approval.members ?? {};
  // The child's passkey over this invoice is the child's ask: the parent's window says who asks once it is there.
  const childAsks = role === 'parent' && approval.approvedRoles.includes('child');

  return (
    <article
      aria-label={`Order from ${showSignedText(terms.merchantName)} for ${formatMoney(terms.totalCents)}`}
      className={`rounded-xl border bg-white p-4 shadow-sm ${actionable ? 'border-sky-300' : 'border-slate-200'}`}
    >
      {childAsks && (
        <p className="mb-2 text-slate-800">
          <strong>
            <bdi>{members.child ?? 'Your child'}</bdi>
          </strong>{' '}
          asks to order from <SignedText text={terms.merchantName} />.
        </p>
      )}
      <SignedTerms
        title={
          <h3 className="text-lg font-semibold">
            <SignedText text={terms.merchantName} /> — {formatMoney(terms.totalCents)}
          </h3>
        }
        merchantName={terms.merchantName}
        merchantDid={terms.merchantId}
        items={terms.items}
        totalCents={terms.totalCents}
      />
      <dl className="mt-3 grid grid-cols-[auto_1fr] gap-x-3 gap-y-1 text-sm">
        <dt className="text-slate-600">Deliver to</dt>
        <dd className="font-medium">
          <SignedText text={terms.deliverTo} />
        </dd>
        <dt className="text-slate-600">Also approving</dt>
        <dd>
          {others.length === 0 && approval.allowance !== undefined
            ? `nobody else — covered by ${members.parent === undefined ? "your parent's" : `${members.parent}'s`} allowance (${formatMoney(approval.allowance.remainingCents)} left ${approval.allowance.period === 'day' ? 'today' : 'this week'})`
            : others.length === 0
              ? `nobody else — under ${formatMoney(1000)} the ${role} alone approves`
              : others
                  .map(
                    (other) =>
                      `${members[other] === undefined ? '' : `${members[other]}, `}the ${other} (${approval.approvedRoles.includes(other) ? 'approved ✓' : 'waiting'})`,
                  )
                  .join(', ')}
        </dd>
        {closed === undefined && !expired && (
          <>
            <dt className="text-slate-600">Expires</dt>
            <dd className="tabular-nums">in {formatCountdown(left)}</dd>
          </>
        )}
      </dl>

      {approval.handover !== undefined && closed === undefined && !expired && (
        <p role="note" className="mt-3 rounded-lg bg-sky-50 p-2 text-sm text-sky-950">
          {role === 'parent'
            ? `${members.child ?? 'Your child'} approved this under your allowance, but ${handoverReason(approval.handover)} before it was paid. Nothing was charged: it needs your passkey now.`
            : handedOverNotice(approval.handover, members.parent)}
        </p>
      )}
      {hidden && (
        <p role="note" className="mt-3 rounded-lg bg-amber-50 p-2 text-sm text-amber-900">
          The signed terms contain invisible or control characters, shown above as marked codes such as \u202E. Text
          like this can read differently from what was signed; the household's policy will not pay for it, so decline
          this order.
        </p>
      )}
      {closed === 'declined-here' && (
        <p className="mt-3 text-amber-900">You declined this order. Nothing will be charged.</p>
      )}
      {closed === 'gone' && (
        <p className="mt-3 text-slate-700">
          {expired
            ? 'This request expired. It can no longer be approved.'
            : 'This request is no longer waiting: it was declined in another window or has expired.'}
        </p>
      )}
      {closed === undefined && expired && (
        <p className="mt-3 text-amber-900">This request expired. It can no longer be approved.</p>
      )}
      {closed === undefined && approvedHere && !expired && (
        <p className="mt-3 text-emerald-800">
          Approved ✓ — your signed approval was sent.
          {others.some((other) => !approval.approvedRoles.includes(other)) ? ' Waiting for the others.' : ''}
        </p>
      )}

      <div className="mt-4 flex gap-2">
        {actionable && (
          <>
            <button
              type="button"
              onClick={onApprove}
              disabled={busy}
              className="rounded-lg bg-emerald-700 px-4 py-2 font-medium text-white hover:bg-emerald-800 disabled:opacity-60"
            >
              Approve with passkey
            </button>
            <button
              type="button"
              onClick={onDecline}
              disabled={busy}
              className="rounded-lg border border-slate-300 bg-white px-4 py-2 font-medium hover:bg-slate-100 disabled:opacity-60"
            >
              Decline
            </button>
          </>
        )}
        {closed !== undefined && onDismiss && (
          <button
            type="button"
            onClick={onDismiss}
            className="rounded-lg border border-slate-300 bg-white px-3 py-1 text-sm hover:bg-slate-100"
          >
            Dismiss
          </button>
        )}
      </div>
    </article>
  );
}
