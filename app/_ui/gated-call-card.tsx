'use client';

import { formatCountdown } from './format';
import { hasHiddenCharacters, SignedText } from './signed-text';
import { useNow } from './use-now';

type Role = 'child' | 'parent';

/** A gated non-payment call as the pending route sends it: every hashed argument, from the canonical bytes. */
export interface PendingCall {
  readonly requestId: string;
  readonly status: string;
  readonly tool: string;
  readonly action: string;
  readonly at?: string;
  readonly arguments: ReadonlyArray<{ readonly name: string; readonly value: string }>;
  readonly requiredRoles: readonly Role[];
  readonly approvedRoles: readonly Role[];
  readonly expiresAt: string;
}

/**
 * One gated non-payment call in the approval window (docs/human-authority.md, "A gated
 * non-payment request"): what the agent asks, and every argument the passkey will sign, labelled
 * as the agent's words and shown as text with hidden characters as visible escapes.
 */
export function GatedCallCard({
  call,
  role,
  busy,
  outcome,
  onApprove,
  onDecline,
}: {
  readonly call: PendingCall;
  readonly role: Role;
  readonly busy: boolean;
  /** What this window did to it, once it did. */
  readonly outcome?: 'approved-here' | 'declined-here';
  readonly onApprove?: () => void;
  readonly onDecline?: () => void;
}) {
  const now = useNow(outcome === undefined);
  const left = Date.parse(call.expiresAt) - now;
  const expired = left <= 0;
  const approvedHere = outcome === 'approved-here' || call.approvedRoles.includes(role);
  const actionable = outcome === undefined && !expired && !approvedHere;
  const hidden = call.arguments.some((argument) => hasHiddenCharacters(argument.name + argument.value));

  return (
    <article
      aria-label={`Your agent asks to ${call.action}`}
      data-gated-call={call.requestId}
      className={`rounded-xl border bg-white p-4 shadow-sm ${actionable ? 'border-sky-300' : 'border-slate-200'}`}
    >
      <h3 className="text-lg font-semibold">
        Your agent asks to <strong>{call.action}</strong>
        {call.at === undefined ? '' : ' at '}
        {call.at === undefined ? null : <SignedText text={call.at} />}.
      </h3>
      <p className="mt-2 text-sm text-slate-700">Requested by the agent:</p>
      {/* Every character the passkey signs stays on screen: runs of spaces are kept, not collapsed,
          and a long value wraps inside the card instead of running past its edge. */}
      <ul className="mt-1 space-y-1 whitespace-pre-wrap wrap-anywhere rounded-lg bg-slate-50 p-2 font-mono text-sm">
        {call.arguments.map((argument) => (
          <li key={argument.name}>
            <SignedText text={argument.name} />: <SignedText text={argument.value} />
          </li>
        ))}
      </ul>
      {outcome === undefined && !expired && !approvedHere && (
        <p className="mt-2 text-sm tabular-nums text-slate-600">Expires in {formatCountdown(left)}</p>
      )}
      {hidden && (
        <p role="note" className="mt-3 rounded-lg bg-amber-50 p-2 text-sm text-amber-900">
          What the agent wrote contains invisible or control characters, shown above as marked codes such as \u202E. It
          can read differently from what would run; decline it if you are unsure.
        </p>
      )}
      {approvedHere && <p className="mt-3 text-emerald-800">Approved ✓ — the call will run once, exactly as shown.</p>}
      {outcome === 'declined-here' && <p className="mt-3 text-amber-900">Declined. The call will not run.</p>}
      {outcome === undefined && expired && !approvedHere && (
        <p className="mt-3 text-amber-900">This request expired. It can no longer be approved.</p>
      )}
      {actionable && (
        <div className="mt-4 flex gap-2">
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
        </div>
      )}
    </article>
  );
}
