'use client';

import { type FormEvent, useId, useState } from 'react';
import type { ElicitationEvent } from './chat-model';

/** The proxy asks the human for a missing field (MCP form elicitation): labelled fields, Submit / Decline. */
export function ElicitationForm({
  form,
  closed,
  onAnswer,
}: {
  readonly form: ElicitationEvent;
  readonly closed?: 'accept' | 'decline' | 'cancel' | undefined;
  readonly onAnswer: (action: 'accept' | 'decline', content?: Record<string, string>) => Promise<string | undefined>;
}) {
  const id = useId();
  const [values, setValues] = useState<Record<string, string>>({});
  const [sending, setSending] = useState(false);
  const [error, setError] = useState<string>();

  const answer = async (action: 'accept' | 'decline') => {
    setSending(true);
    setError(undefined);
    const content = Object.fromEntries(form.fields.map((field) => [field.name, (values[field.name] ?? '').trim()]));
    const problem = await onAnswer(action, action === 'accept' ? content : undefined);
    setSending(false);
    if (problem !== undefined) setError(problem);
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    void answer('accept');
  };

  if (closed !== undefined) {
    return (
      <p className="rounded-lg border border-slate-200 bg-white px-4 py-3 text-sm text-slate-700">
        {closed === 'accept'
          ? 'Sent ✓ — the details went to the shop with the order.'
          : 'Declined — nothing was sent. Without it the shop cannot take this order; the agent says what it can do instead.'}
      </p>
    );
  }
  return (
    <form
      onSubmit={submit}
      aria-labelledby={`${id}-title`}
      className="rounded-xl border border-sky-200 bg-sky-50 p-4 text-sm shadow-sm"
    >
      <h3 id={`${id}-title`} className="font-semibold text-sky-950">
        The shop needs a detail
      </h3>
      <p className="mt-1 text-slate-800">{form.message}</p>
      <div className="mt-3 space-y-3">
        {form.fields.map((field) => (
          <div key={field.name}>
            <label htmlFor={`${id}-${field.name}`} className="block font-medium">
              {field.title}
              {field.required ? '' : ' (optional)'}
            </label>
            <input
              id={`${id}-${field.name}`}
              name={field.name}
              required={field.required}
              maxLength={500}
              value={values[field.name] ?? ''}
              onChange={(event) => setValues({ ...values, [field.name]: event.target.value })}
              className="mt-1 w-full rounded-md border border-slate-300 bg-white px-3 py-2"
            />
          </div>
        ))}
      </div>
      {error && (
        <p role="alert" className="mt-2 text-amber-900">
          {error}
        </p>
      )}
      <div className="mt-3 flex gap-2">
        <button
          type="submit"
          disabled={sending}
          className="rounded-md bg-sky-800 px-4 py-2 font-medium text-white hover:bg-sky-900 disabled:opacity-60"
        >
          Submit
        </button>
        <button
          type="button"
          disabled={sending}
          onClick={() => void answer('decline')}
          className="rounded-md border border-slate-300 bg-white px-4 py-2 font-medium hover:bg-slate-100 disabled:opacity-60"
        >
          Decline
        </button>
      </div>
    </form>
  );
}
