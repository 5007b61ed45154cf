'use client';

import type { AttackMoveName } from '@/lib/index';
import type { AttackEvent } from './chat-model';

/** Each move's button, in short human words; `satisfies` keeps it in step with the server's moves. */
const moveLabels = {
  'call-without-search': 'Call a tool without searching',
  'order-without-approval': 'Pay with no approval',
  'replay-spent-approval': 'Replay a spent approval',
  'tamper-amount': 'Change the amount',
  'parent-approval-for-another-invoice': "Reuse the parent's approval on a new invoice",
  'child-as-parent': 'Child approves as the parent',
  'order-300': 'Order $300.00 of pizza',
  'clerk-injection': 'Talk the clerk into 90% off',
  'load-attacker-server': 'Load an attacker\'s server as "payments"',
  'lookalike-tool': 'Call a look-alike tool name',
} as const satisfies Record<AttackMoveName, string>;

/** A move's label for its result card; an unknown name shows as itself. */
function labelOf(move: string): string {
  return Object.hasOwn(moveLabels, move) ? moveLabels[move as AttackMoveName] : move;
}

/**
 * The attack console (SPEC §8, UI.md): behind a "Try to break it" disclosure, one button per
 * scripted hostile move; a button sends `/attack <name>` as the user's message, so the move and its
 * refusal land in the conversation like any turn. Native disclosure and buttons: keyboard first.
 */
export function AttackConsole({
  disabled,
  onRun,
}: {
  readonly disabled: boolean;
  readonly onRun: (move: AttackMoveName) => void;
}) {
  return (
    <details className="mt-2 rounded-lg border border-slate-200 bg-white text-sm">
      <summary className="cursor-pointer px-3 py-2 font-medium text-slate-800">Try to break it</summary>
      <div className="border-t border-slate-200 px-3 pb-3 pt-2">
        <p className="text-slate-700">
          Each button runs a hostile move through the real proxy in a new session of this chat. The household should
          refuse every one, in its own words, and charge nothing. Some moves reuse the approvals of your last order, so
          complete one first.
        </p>
        <ul className="mt-2 flex flex-wrap gap-2" aria-label="Hostile moves">
          {(Object.keys(moveLabels) as AttackMoveName[]).map((move) => (
            <li key={move}>
              <button
                type="button"
                disabled={disabled}
                onClick={() => onRun(move)}
                title={`/attack ${move}`}
                className="rounded-full border border-slate-300 bg-slate-50 px-3 py-1.5 hover:bg-slate-100 disabled:opacity-60"
              >
                {moveLabels[move]}
              </button>
            </li>
          ))}
        </ul>
      </div>
    </details>
  );
}

/**
 * One move's result: what it tried and each refusal in the words of whoever refused it, styled as
 * information (a refusal is the household working). A move that went through is the one thing shown
 * as a warning.
 */
export function AttackResult({ attack }: { readonly attack: AttackEvent }) {
  const label = labelOf(attack.move);
  const tone =
    attack.outcome === 'not-refused'
      ? 'border-amber-400 bg-amber-50'
      : attack.outcome === 'refused'
        ? 'border-sky-200 bg-sky-50'
        : 'border-slate-200 bg-slate-50';
  const heading =
    attack.outcome === 'refused'
      ? `Refused ✓ — ${label}`
      : attack.outcome === 'needs-evidence'
        ? `Not run yet — ${label}`
        : attack.outcome === 'not-refused'
          ? `Not refused — ${label}`
          : `Did not get far — ${label}`;
  return (
    <section
      aria-label={`Attack: ${label}`}
      data-attack={attack.move}
      data-outcome={attack.outcome}
      className={`rounded-xl border p-4 text-sm ${tone}`}
    >
      <h3 className="font-semibold text-slate-900">{heading}</h3>
      <p className="mt-1 text-slate-700">{attack.attempt}</p>
      {attack.outcome === 'refused' ? (
        <ul className="mt-2 space-y-1">
          {attack.refusals.map((refusal, index) => (
            // Refusals of one move never reorder: their position is their identity.
            // biome-ignore lint/suspicious/noArrayIndexKey: a fixed list from one event
            <li key={index} className="whitespace-pre-wrap text-slate-900">
              <span className="font-medium">Refused:</span> {refusal.reason}
              <span className="text-slate-600"> — at {refusal.step}</span>
            </li>
          ))}
        </ul>
      ) : (
        <p className="mt-2 whitespace-pre-wrap text-slate-900">{attack.reason}</p>
      )}
      <p className="mt-2 font-medium text-slate-800">
        {attack.charged ? 'A payment went through: this is a defect.' : 'Nothing was charged.'}
      </p>
    </section>
  );
}
