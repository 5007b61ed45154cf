'use client';

import { useEffect, useRef, useState } from 'react';
import { shortDid } from './format';

/** One live-log row as `/api/log/stream` sends it: an audit-table row id, its chain hash and the event. */
export interface LogRow {
  readonly id: number;
  readonly hash: string;
  readonly at: string;
  readonly source: string;
  readonly kind: string;
  readonly outcome: 'allow' | 'deny' | 'ok' | 'error' | 'info';
  readonly session?: string;
  readonly orderId?: string;
  readonly approvalId?: string;
  readonly message: string;
}

/** What the viewer narrows the log to; mirrored in the page's query string so a link can carry it. */
export interface LogFilters {
  readonly session: string;
  readonly order: string;
  readonly kind: string;
  readonly outcome: string;
}

type Connection = 'connecting' | 'live' | 'reconnecting';

/** Rows kept on the page; older ones stay in the audit table. */
const maxRows = 2000;
const outcomes = ['allow', 'deny', 'ok', 'error', 'info'] as const;

/**
 * The live log (SPEC §8, UI.md): one row per decision, denials highlighted, filters for session,
 * order, kind and outcome, a follow-tail toggle. The browser's EventSource resumes after a dropped
 * connection with `Last-Event-ID`, and the server sends each row once, so nothing is lost or repeated.
 */
export function LiveLog({ initial }: { readonly initial: LogFilters }) {
  const [filters, setFilters] = useState(initial);
  const [rows, setRows] = useState<readonly LogRow[]>([]);
  const [connection, setConnection] = useState<Connection>('connecting');
  const [follow, setFollow] = useState(true);
  const [steps, setSteps] = useState(true);
  const bottom = useRef<HTMLDivElement>(null);

  useEffect(() => {
    const query = new URLSearchParams(Object.entries(filters).filter(([, value]) => value !== '')).toString();
    window.history.replaceState(null, '', query === '' ? '/log' : `/log?${query}`);
    setRows([]);
    setConnection('connecting');
    const source = new EventSource(`/api/log/stream${query === '' ? '' : `?${query}`}`);
    source.onopen = () => setConnection('live');
    source.onmessage = (message) => {
      const row = JSON.parse(message.data) as LogRow;
      setRows((current) => [...current.slice(-(maxRows - 1)), row]);
    };
    // EventSource reconnects by itself, sending the last id it saw.
    source.onerror = () => setConnection('reconnecting');
    return () => source.close();
  }, [filters]);

  useEffect(() => {
    if (follow && rows.length > 0) bottom.current?.scrollIntoView({ block: 'end' });
  }, [follow, rows]);

  const narrow = (name: keyof LogFilters, value: string) =>
    setFilters((current) => (current[name] === value.trim() ? current : { ...current, [name]: value.trim() }));
  const anyFilter = Object.values(filters).some((value) => value !== '');

  return (
    <main className="mx-auto max-w-7xl px-4 py-6 text-lg">
      <div className="flex flex-wrap items-baseline justify-between gap-3">
        <h1 className="text-3xl font-semibold">Live log</h1>
        <p className="text-base text-slate-700" aria-live="polite" data-connection={connection}>
          {connection === 'live' ? '● live' : connection === 'connecting' ? 'connecting…' : 'reconnecting…'}
          {` · ${rows.length} ${rows.length === 1 ? 'event' : 'events'}`}
        </p>
      </div>
      <p className="mt-1 text-base text-slate-700">
        Every decision of the proxy, the policy, identity and payments, as it is written to the hash-chained audit
        table.
      </p>
      <form
        className="mt-4 flex flex-wrap items-end gap-3 rounded-lg border border-slate-200 bg-white p-3 text-base"
        onSubmit={(event) => event.preventDefault()}
        aria-label="Filters"
      >
        <FilterField label="Session" value={filters.session} onCommit={(value) => narrow('session', value)} />
        <FilterField label="Order" value={filters.order} onCommit={(value) => narrow('order', value)} />
        <FilterField
          label="Kind"
          value={filters.kind}
          onCommit={(value) => narrow('kind', value)}
          placeholder="call-decision"
        />
        <label className="flex flex-col gap-1">
          <span className="font-medium">Outcome</span>
          <select
            name="outcome"
            value={filters.outcome}
            onChange={(event) => narrow('outcome', event.target.value)}
            className="rounded border border-slate-300 bg-white px-2 py-1"
          >
            <option value="">any</option>
            {outcomes.map((outcome) => (
              <option key={outcome} value={outcome}>
                {outcome}
              </option>
            ))}
          </select>
        </label>
        {anyFilter ? (
          <button
            type="button"
            className="rounded border border-slate-300 px-3 py-1 hover:bg-slate-100"
            onClick={() => setFilters({ session: '', order: '', kind: '', outcome: '' })}
          >
            Clear filters
          </button>
        ) : null}
        <label className="ml-auto flex items-center gap-2">
          <input type="checkbox" checked={steps} onChange={(event) => setSteps(event.target.checked)} />
          Every filter step
        </label>
        <label className="flex items-center gap-2">
          <input type="checkbox" checked={follow} onChange={(event) => setFollow(event.target.checked)} />
          Follow new events
        </label>
      </form>
      <div className="mt-4 overflow-x-auto rounded-lg border border-slate-200 bg-white">
        <table className="w-full border-collapse text-left">
          <thead className="bg-slate-100 text-base">
            <tr>
              <th scope="col" className="px-3 py-2">
                Time
              </th>
              <th scope="col" className="px-3 py-2">
                Source
              </th>
              <th scope="col" className="px-3 py-2">
                Kind
              </th>
              <th scope="col" className="px-3 py-2">
                Outcome
              </th>
              <th scope="col" className="px-3 py-2">
                Session
              </th>
              <th scope="col" className="px-3 py-2">
                Order
              </th>
              <th scope="col" className="px-3 py-2">
                What happened
              </th>
            </tr>
          </thead>
          <tbody>
            {rows
              .filter((row) => steps || !isRoutineStep(row))
              .map((row) => (
                <LogRowView key={row.id} row={row} narrow={narrow} />
              ))}
          </tbody>
        </table>
        {rows.length === 0 ? (
          <p className="px-3 py-6 text-slate-600">
            {anyFilter ? 'No events match these filters yet.' : 'No events yet: start an order in the chat.'}
          </p>
        ) : null}
      </div>
      <div ref={bottom} />
    </main>
  );
}

/** A text filter applied on Enter or when focus leaves it, so typing does not reconnect on every key. */
function FilterField(props: {
  readonly label: string;
  readonly value: string;
  readonly placeholder?: string;
  readonly onCommit: (value: string) => void;
}) {
  const [draft, setDraft] = useState(props.value);
  useEffect(() => setDraft(props.value), [props.value]);
  return (
    <label className="flex flex-col gap-1">
      <span className="font-medium">{props.label}</span>
      <input
        name={props.label.toLowerCase()}
        value={draft}
        onChange={(event) => setDraft(event.target.value)}
        onBlur={() => props.onCommit(draft)}
        onKeyDown={(event) => {
          if (event.key === 'Enter') props.onCommit(draft);
        }}
        placeholder={props.placeholder ?? 'any'}
        className="w-56 rounded border border-slate-300 px-2 py-1 font-mono text-base"
      />
    </label>
  );
}

const outcomeStyles: Record<LogRow['outcome'], string> = {
  allow: 'bg-emerald-100 text-emerald-900',
  ok: 'bg-emerald-100 text-emerald-900',
  deny: 'bg-red-700 text-white',
  error: 'bg-amber-200 text-amber-950',
  info: 'bg-slate-100 text-slate-800',
};

function LogRowView({
  row,
  narrow,
}: {
  readonly row: LogRow;
  readonly narrow: (name: keyof LogFilters, value: string) => void;
}) {
  const denied = row.outcome === 'deny' || row.outcome === 'error';
  return (
    <tr
      data-event-id={row.id}
      data-outcome={row.outcome}
      className={`border-t border-slate-200 align-top ${denied ? 'border-l-8 border-l-red-700 bg-red-50' : ''}`}
    >
      <td className="whitespace-nowrap px-3 py-2 font-mono text-base" title={row.at}>
        {new Date(row.at).toLocaleTimeString()}
      </td>
      <td className="px-3 py-2">{row.source}</td>
      <td className="whitespace-nowrap px-3 py-2 font-mono text-base">
        <button type="button" className="hover:underline" onClick={() => narrow('kind', row.kind)}>
          {row.kind}
        </button>
      </td>
      <td className="px-3 py-2">
        <span className={`rounded px-2 py-0.5 font-semibold ${outcomeStyles[row.outcome]}`}>{row.outcome}</span>
      </td>
      <td className="px-3 py-2 font-mono text-base">
        {row.session === undefined ? null : (
          <button
            type="button"
            className="hover:underline"
            title={`${row.session} — show only this session`}
            onClick={() => narrow('session', row.session ?? '')}
          >
            {shortId(row.session)}
          </button>
        )}
      </td>
      <td className="px-3 py-2 font-mono text-base">
        {row.orderId === undefined ? null : (
          <button
            type="button"
            className="hover:underline"
            title={`${row.orderId} — show only this order`}
            onClick={() => narrow('order', row.orderId ?? '')}
          >
            {shortId(row.orderId)}
          </button>
        )}
      </td>
      <td className={`px-3 py-2 wrap-anywhere ${denied ? 'font-semibold text-red-900' : ''}`}>{row.message}</td>
    </tr>
  );
}

/** A pipeline filter that let a call or search through: hidden when the viewer wants only what mattered. */
function isRoutineStep(row: LogRow): boolean {
  return (
    row.kind.endsWith('-decision') &&
    row.kind !== 'policy-decision' &&
    (row.outcome === 'allow' || row.outcome === 'info')
  );
}

/** Ids shortened for the table; the full value is in the title. */
function shortId(id: string): string {
  if (id.startsWith('did:')) return shortDid(id);
  const bare = id.replace(/^urn:uuid:/, '');
  return bare.length <= 12 ? bare : `${bare.slice(0, 8)}…`;
}
