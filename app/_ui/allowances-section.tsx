'use client';

import { startAuthentication } from '@simplewebauthn/browser';
import { type FormEvent, useCallback, useEffect, useState } from 'react';
import { formatMoney, type MemberNames } from './format';
import { identityCall } from './identity-call';
import { passkeyProblem } from './passkey-problem';

/** An allowance's terms as the list route sends them (read from the signed terms' canonical bytes). */
interface AllowanceTerms {
  readonly id: string;
  readonly merchantDid: string;
  readonly merchantName: string;
  readonly perOrderCapCents: number;
  readonly budgetCents: number;
  readonly period: 'day' | 'week';
  readonly timeZone: string;
  readonly expiresAt: number;
}

/** One row of the list route. */
interface AllowanceRow {
  readonly allowanceId: string;
  readonly terms: AllowanceTerms;
  readonly state: 'active' | 'revoked' | 'expired' | 'not-started';
  readonly remainingCents: number;
  readonly revokedAt?: string;
}

interface Merchant {
  readonly did: string;
  readonly name: string;
}

/** `31 Dec`, in the allowance's own zone. */
function dayOf(seconds: number, timeZone: string): string {
  return new Date(seconds * 1000).toLocaleDateString('en-GB', { day: 'numeric', month: 'short', timeZone });
}

/** `$5.00` typed as `5` or `5.00` → 500; anything else → `undefined`. */
function centsOf(text: string): number | undefined {
  if (!/^\d{1,4}(\.\d{1,2})?$/.test(text.trim())) return undefined;
  return Math.round(Number(text.trim()) * 100);
}

/**
 * The last second of a date (`2027-01-03`) in the household's zone, in seconds since the epoch: an
 * allowance "until 3 Jan" ends when 3 January ends where the household counts its days, not where
 * this browser is.
 */
function endOfDayIn(date: string, timeZone: string): number {
  const [year, month, day] = date.split('-').map(Number) as [number, number, number];
  const wall = Date.UTC(year, month - 1, day, 23, 59, 59);
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  });
  // The zone's offset at an instant: what its clock reads then, read as UTC, minus the instant.
  const offsetAt = (instant: number) => {
    const parts = format.formatToParts(instant);
    const field = (type: string) => Number(parts.find((part) => part.type === type)?.value);
    return (
      Date.UTC(field('year'), field('month') - 1, field('day'), field('hour'), field('minute'), field('second')) -
      instant
    );
  };
  // Twice: the offset at the first guess may differ from the one at the answer across a DST change.
  const guess = wall - offsetAt(wall);
  return Math.floor((wall - offsetAt(guess)) / 1000);
}

/** The local date 30 days ahead, as a date input wants it (`2027-01-02`). */
function defaultUntil(): string {
  const date = new Date(Date.now() + 30 * 24 * 60 * 60 * 1000);
  return `${date.getFullYear()}-${String(date.getMonth() + 1).padStart(2, '0')}-${String(date.getDate()).padStart(2, '0')}`;
}

/**
 * The parent window's "Standing allowances" (docs/human-authority.md "The window views"): the form
 * the parent signs with their passkey, and the list of allowances with what each has left, each
 * revocable after a confirmation. The zone is the household's, stated in the form and signed in the
 * terms (the server refuses a form that showed another); the child is named as the household names
 * them; the merchant's name is the one the household trusts it under.
 */
export function AllowancesSection({
  members,
  timeZone,
  onStale,
}: {
  readonly members: MemberNames;
  /** The household's zone, which the form shows and sends. */
  readonly timeZone: string;
  /** The household's profile changed since it was read (another window): read it again. */
  readonly onStale: () => void;
}) {
  /** Who the allowance is for: the household's one child, by the name the parent gave, else "your child". */
  const child = members.child ?? 'your child';
  const Child = members.child ?? 'Your child';
  const [rows, setRows] = useState<readonly AllowanceRow[]>([]);
  const [merchants, setMerchants] = useState<readonly Merchant[]>([]);
  const [merchantDid, setMerchantDid] = useState('');
  const [cap, setCap] = useState('5.00');
  const [budget, setBudget] = useState('10.00');
  const [period, setPeriod] = useState<'day' | 'week'>('day');
  const [until, setUntil] = useState(defaultUntil);
  const [signed, setSigned] = useState<string>();
  const [problem, setProblem] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [confirming, setConfirming] = useState<string>();
  const [revokedHere, setRevokedHere] = useState<ReadonlySet<string>>(new Set());

  const load = useCallback(async () => {
    const answer = await identityCall<{ allowances: AllowanceRow[]; merchants: Merchant[] }>(
      '/api/identity/allowances?as=parent',
      { method: 'GET' },
    );
    if (!answer.ok) return;
    setRows(answer.value.allowances);
    setMerchants(answer.value.merchants);
    setMerchantDid((current) => current || (answer.value.merchants[0]?.did ?? ''));
  }, []);

  // What is left changes as the child orders: the list is read again every two seconds.
  useEffect(() => {
    void load();
    const timer = setInterval(() => void load(), 2000);
    return () => clearInterval(timer);
  }, [load]);

  const merchantName = merchants.find((merchant) => merchant.did === merchantDid)?.name ?? 'the shop';

  const sign = (event: FormEvent) => {
    event.preventDefault();
    const perOrderCapCents = centsOf(cap);
    const budgetCents = centsOf(budget);
    if (perOrderCapCents === undefined || budgetCents === undefined)
      return setProblem('Write each amount in dollars, such as 5 or 5.00.');
    const expiresAt = endOfDayIn(until, timeZone);
    setBusy(true);
    setProblem(undefined);
    setSigned(undefined);
    void (async () => {
      try {
        const begun = await identityCall<{
          ceremonyId: string;
          options: Parameters<typeof startAuthentication>[0]['optionsJSON'];
          terms: AllowanceTerms;
        }>('/api/identity/allowance/options?as=parent', {
          method: 'POST',
          body: { merchantDid, perOrderCapCents, budgetCents, period, timeZone, expiresAt },
        });
        if (!begun.ok) {
          if (/household's is/.test(begun.error)) onStale();
          return setProblem(begun.error);
        }
        let response: Awaited<ReturnType<typeof startAuthentication>>;
        try {
          response = await startAuthentication({ optionsJSON: begun.value.options });
        } catch (error) {
          return setProblem(passkeyProblem(error));
        }
        const finished = await identityCall('/api/identity/allowance/verify?as=parent', {
          method: 'POST',
          body: { ceremonyId: begun.value.ceremonyId, response },
        });
        if (!finished.ok) return setProblem(finished.error);
        const terms = begun.value.terms;
        setSigned(
          `Allowance signed ✓ — ${Child} can order up to ${formatMoney(terms.perOrderCapCents)} at a time, ${formatMoney(terms.budgetCents)} a ${terms.period}, until ${dayOf(terms.expiresAt, terms.timeZone)}.`,
        );
        await load();
      } finally {
        setBusy(false);
      }
    })();
  };

  const revoke = (row: AllowanceRow) => {
    setBusy(true);
    setProblem(undefined);
    void (async () => {
      try {
        const answer = await identityCall('/api/identity/allowance/revoke?as=parent', {
          method: 'POST',
          body: { allowanceId: row.allowanceId },
        });
        if (!answer.ok) return setProblem(answer.error);
        setConfirming(undefined);
        setRevokedHere((previous) => new Set([...previous, row.allowanceId]));
        await load();
      } finally {
        setBusy(false);
      }
    })();
  };

  return (
    <section aria-labelledby="allowances-title" className="mt-8 rounded-xl border border-slate-200 bg-white p-4">
      <h2 id="allowances-title" className="text-lg font-semibold">
        Standing allowances
      </h2>
      <form onSubmit={sign} aria-label="New allowance" className="mt-3 space-y-2 text-slate-800">
        <p>
          Let{' '}
          <strong>
            <bdi>{child}</bdi>
          </strong>{' '}
          order from{' '}
          {merchants.length > 1 ? (
            <select
              aria-label="Merchant"
              value={merchantDid}
              onChange={(event) => setMerchantDid(event.target.value)}
              className="rounded-md border border-slate-300 px-2 py-1 font-semibold"
            >
              {merchants.map((merchant) => (
                <option key={merchant.did} value={merchant.did}>
                  {merchant.name}
                </option>
              ))}
            </select>
          ) : (
            <strong>{merchantName}</strong>
          )}{' '}
          without asking you
        </p>
        <p>
          <label>
            up to $
            <input
              aria-label="Per-order cap in dollars"
              inputMode="decimal"
              value={cap}
              onChange={(event) => setCap(event.target.value)}
              className="mx-1 w-20 rounded-md border border-slate-300 px-2 py-1 tabular-nums"
            />
            an order
          </label>
        </p>
        <p>
          <label>
            and $
            <input
              aria-label="Budget in dollars"
              inputMode="decimal"
              value={budget}
              onChange={(event) => setBudget(event.target.value)}
              className="mx-1 w-20 rounded-md border border-slate-300 px-2 py-1 tabular-nums"
            />
          </label>{' '}
          a{' '}
          <select
            aria-label="Period"
            value={period}
            onChange={(event) => setPeriod(event.target.value === 'week' ? 'week' : 'day')}
            className="rounded-md border border-slate-300 px-2 py-1"
          >
            <option value="day">day</option>
            <option value="week">week</option>
          </select>{' '}
          <span className="text-slate-600" title="The household's time zone, set under Your household">
            ({timeZone})
          </span>
        </p>
        <p>
          <label>
            until{' '}
            <input
              type="date"
              aria-label="Until"
              value={until}
              onChange={(event) => setUntil(event.target.value)}
              className="rounded-md border border-slate-300 px-2 py-1"
            />
          </label>
        </p>
        <button
          type="submit"
          disabled={busy || merchantDid === ''}
          className="rounded-lg bg-sky-800 px-4 py-2 font-medium text-white hover:bg-sky-900 disabled:opacity-60"
        >
          Sign with passkey
        </button>
      </form>
      <div aria-live="polite" className="mt-3 space-y-2">
        {signed && <p className="rounded-md bg-emerald-50 px-3 py-2 text-emerald-900">{signed}</p>}
        {problem && (
          <p role="alert" className="rounded-md bg-amber-50 px-3 py-2 text-amber-900">
            {problem}
          </p>
        )}
      </div>
      {rows.length > 0 && (
        <ul aria-label="Allowances" className="mt-4 space-y-3">
          {rows.map((row) => (
            <AllowanceItem
              key={row.allowanceId}
              row={row}
              child={child}
              busy={busy}
              confirming={confirming === row.allowanceId}
              revokedHere={revokedHere.has(row.allowanceId)}
              onRevoke={() => setConfirming(row.allowanceId)}
              onConfirm={() => revoke(row)}
              onKeep={() => setConfirming(undefined)}
            />
          ))}
        </ul>
      )}
    </section>
  );
}

function AllowanceItem({
  row,
  child,
  busy,
  confirming,
  revokedHere,
  onRevoke,
  onConfirm,
  onKeep,
}: {
  readonly row: AllowanceRow;
  /** The child's name, or "your child". */
  readonly child: string;
  readonly busy: boolean;
  readonly confirming: boolean;
  readonly revokedHere: boolean;
  readonly onRevoke: () => void;
  readonly onConfirm: () => void;
  readonly onKeep: () => void;
}) {
  const { terms } = row;
  const live = row.state === 'active' || row.state === 'not-started';
  const ended =
    row.state === 'revoked'
      ? revokedHere
        ? 'Revoked ✓ just now'
        : `Revoked on ${new Date(row.revokedAt ?? 0).toLocaleString('en-GB', { day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit', timeZone: terms.timeZone })}`
      : row.state === 'expired'
        ? `Ended on ${dayOf(terms.expiresAt, terms.timeZone)}`
        : undefined;
  return (
    <li
      aria-label={`Allowance at ${terms.merchantName}`}
      data-state={row.state}
      className={`rounded-lg border p-3 ${live ? 'border-sky-200 bg-white' : 'border-slate-200 bg-slate-50 text-slate-500'}`}
    >
      <div className="flex flex-wrap items-baseline justify-between gap-2">
        <p>
          <strong>{terms.merchantName}</strong> · <bdi>{child}</bdi>
        </p>
        {live && (
          <p className="font-medium tabular-nums text-emerald-800">
            {formatMoney(row.remainingCents)} left {terms.period === 'day' ? 'today' : 'this week'}
          </p>
        )}
      </div>
      <p className="text-sm">
        up to {formatMoney(terms.perOrderCapCents)} an order, {formatMoney(terms.budgetCents)} a {terms.period} (
        {terms.timeZone}) · until {dayOf(terms.expiresAt, terms.timeZone)}
      </p>
      {ended && <p className="mt-1 text-sm font-medium">{ended}</p>}
      {live && !confirming && (
        <button
          type="button"
          onClick={onRevoke}
          disabled={busy}
          className="mt-2 rounded-lg border border-slate-300 bg-white px-3 py-1 text-sm font-medium hover:bg-slate-100 disabled:opacity-60"
        >
          Revoke
        </button>
      )}
      {live && confirming && (
        <div role="alertdialog" aria-label="Revoke this allowance?" className="mt-2 rounded-md bg-amber-50 p-2">
          <p className="text-amber-900">
            Revoke <bdi>{child}</bdi>'s allowance at {terms.merchantName}? Orders will need your approval again.
          </p>
          <div className="mt-2 flex gap-2">
            <button
              type="button"
              onClick={onConfirm}
              disabled={busy}
              className="rounded-lg bg-amber-800 px-3 py-1 text-sm font-medium text-white hover:bg-amber-900 disabled:opacity-60"
            >
              Revoke
            </button>
            <button
              type="button"
              onClick={onKeep}
              disabled={busy}
              className="rounded-lg border border-slate-300 bg-white px-3 py-1 text-sm font-medium hover:bg-slate-100"
            >
              Keep it
            </button>
          </div>
        </div>
      )}
    </li>
  );
}
