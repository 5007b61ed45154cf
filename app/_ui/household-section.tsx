'use client';

import { type FormEvent, useEffect, useState } from 'react';
import type { MemberNames } from './format';
import { identityCall } from './identity-call';
import { NameField } from './name-field';

/** The household's profile as the household route sends it. */
export interface HouseholdProfile {
  readonly members: MemberNames;
  readonly timeZone: string;
}

/** Every zone this browser knows, the household's own first if the list lacks it. */
function zonesWith(current: string): readonly string[] {
  const known = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
  return known.includes(current) ? known : [current, ...known];
}

/**
 * The parent window's "Your household" (docs/human-authority.md "Member names and the household's
 * time zone"): the names the windows, the chat and the audit page use for the parent and the
 * child, and the zone an allowance's day or week is counted in. Only the parent's window has it;
 * a refusal is shown in words and changes nothing.
 */
export function HouseholdSection({
  profile,
  onSaved,
}: {
  readonly profile: HouseholdProfile;
  readonly onSaved: (profile: HouseholdProfile) => void;
}) {
  const [parentName, setParentName] = useState(profile.members.parent ?? '');
  const [childName, setChildName] = useState(profile.members.child ?? '');
  const [timeZone, setTimeZone] = useState(profile.timeZone);
  const [saved, setSaved] = useState(false);
  const [problem, setProblem] = useState<string>();
  const [busy, setBusy] = useState(false);
  const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone;

  // Another window may change the profile: the fields follow it until this form is edited.
  useEffect(() => {
    setParentName((typed) => (typed === '' ? (profile.members.parent ?? '') : typed));
    setChildName((typed) => (typed === '' ? (profile.members.child ?? '') : typed));
  }, [profile.members.parent, profile.members.child]);

  const save = (event: FormEvent) => {
    event.preventDefault();
    const names = {
      ...(parentName.trim() === '' ? {} : { parent: parentName }),
      ...(childName.trim() === '' ? {} : { child: childName }),
    };
    setBusy(true);
    setSaved(false);
    setProblem(undefined);
    void (async () => {
      try {
        const answer = await identityCall<HouseholdProfile>('/api/identity/household?as=parent', {
          method: 'POST',
          body: { ...(Object.keys(names).length > 0 ? { names } : {}), timeZone },
        });
        if (!answer.ok) return setProblem(answer.error);
        setSaved(true);
        onSaved(answer.value);
      } finally {
        setBusy(false);
      }
    })();
  };

  return (
    <section aria-labelledby="household-title" className="mt-8 rounded-xl border border-slate-200 bg-white p-4">
      <h2 id="household-title" className="text-lg font-semibold">
        Your household
      </h2>
      <p className="mt-1 text-sm text-slate-700">
        The names the windows, the chat and the audit page use for you and your child. Only this window can change them;
        the agent never can.
      </p>
      <form onSubmit={save} aria-label="Household" className="mt-3 grid grid-cols-[auto_1fr] items-center gap-2">
        <NameField
          id="household-parent-name"
          label="Your name"
          placeholder="the parent"
          value={parentName}
          onChange={setParentName}
        />
        <NameField
          id="household-child-name"
          label="Your child's name"
          placeholder="your child"
          value={childName}
          onChange={setChildName}
        />
        <label htmlFor="household-time-zone" className="text-sm text-slate-700">
          Time zone
        </label>
        <div className="flex flex-wrap items-center gap-2">
          <select
            id="household-time-zone"
            value={timeZone}
            onChange={(event) => setTimeZone(event.target.value)}
            className="rounded-md border border-slate-300 px-2 py-1"
          >
            {zonesWith(profile.timeZone).map((zone) => (
              <option key={zone} value={zone}>
                {zone}
              </option>
            ))}
          </select>
          {browserZone !== profile.timeZone && (
            <span className="text-sm text-slate-600">This browser is in {browserZone}.</span>
          )}
        </div>
        <p className="col-span-2 text-sm text-slate-600">
          An allowance's day or week is counted in this zone, and the allowance states it.
        </p>
        <div className="col-span-2">
          <button
            type="submit"
            disabled={busy}
            className="rounded-lg border border-slate-300 bg-white px-4 py-2 font-medium hover:bg-slate-100 disabled:opacity-60"
          >
            Save
          </button>
        </div>
      </form>
      <div aria-live="polite" className="mt-3 space-y-2">
        {saved && <p className="rounded-md bg-emerald-50 px-3 py-2 text-emerald-900">Saved ✓</p>}
        {problem && (
          <p role="alert" className="rounded-md bg-amber-50 px-3 py-2 text-amber-900">
            {problem}
          </p>
        )}
      </div>
    </section>
  );
}
