'use client';

import { startAuthentication, startRegistration } from '@simplewebauthn/browser';
import { type FormEvent, useCallback, useEffect, useRef, useState } from 'react';
import { AllowancesSection } from './allowances-section';
import { GatedCallCard, type PendingCall } from './gated-call-card';
import { type HouseholdProfile, HouseholdSection } from './household-section';
import { identityCall } from './identity-call';
import { NameField } from './name-field';
import { passkeyProblem } from './passkey-problem';
import { type PendingApproval, PendingApprovalCard } from './pending-approval-card';
import { SiteHeader } from './site-header';

type Role = 'child' | 'parent';
type Session = { readonly signedIn: false } | { readonly signedIn: true; readonly memberDid: string };
/** A request that left the pending list while this window showed it, and what this window knows of why. */
interface ClosedRequest {
  readonly approval: PendingApproval;
  readonly outcome: 'declined-here' | 'gone';
}

const call = identityCall;

/**
 * The approval window of one role (SPEC §5.3, UI.md): enrol with the code from the terminal, sign
 * in with the passkey, then approve or decline what is waiting. Terms come from the signed invoice
 * the server decoded; the list refreshes every second without a reload. Opened for one request
 * (`&request=<id>`, the URL an MCP client was sent), it shows that request only, or says it is not
 * waiting here; "Show everything waiting for you" opens the whole list.
 */
export function ApproveWindow({ role, request }: { readonly role: Role; readonly request?: string }) {
  const [session, setSession] = useState<Session>();
  const [approvals, setApprovals] = useState<readonly PendingApproval[]>([]);
  const [closed, setClosed] = useState<readonly ClosedRequest[]>([]);
  const [calls, setCalls] = useState<readonly PendingCall[]>([]);
  /** Gated calls this window decided, kept on screen with what it did after they leave the pending list. */
  const [decidedCalls, setDecidedCalls] = useState<
    readonly { readonly call: PendingCall; readonly outcome: 'approved-here' | 'declined-here' }[]
  >([]);
  const [notice, setNotice] = useState<string>();
  const [problem, setProblem] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [code, setCode] = useState('');
  /** Typed at the parent's enrollment: the names the household will call the parent and the child. */
  const [enrolNames, setEnrolNames] = useState({ parent: '', child: '' });
  /** The household's names and zone, read while signed in. */
  const [household, setHousehold] = useState<HouseholdProfile>();
  /** Opened for one request: whether the server says it is waiting for this role (unknown until the first poll). */
  const [requestWaiting, setRequestWaiting] = useState<boolean>();
  const declinedHere = useRef(new Set<string>());
  // Approved in this window: the snapshot the poll compares against may predate the approval.
  const approvedHere = useRef(new Set<string>());
  const shown = useRef<readonly PendingApproval[]>([]);

  const loadSession = useCallback(async () => {
    const answer = await call<{ signedIn: boolean; memberDid?: string }>(`/api/identity/session?as=${role}`, {
      method: 'GET',
    });
    if (!answer.ok) {
      setProblem(answer.error);
      return;
    }
    setSession(
      answer.value.signedIn && answer.value.memberDid
        ? { signedIn: true, memberDid: answer.value.memberDid }
        : { signedIn: false },
    );
  }, [role]);

  useEffect(() => {
    void loadSession();
  }, [loadSession]);

  const loadHousehold = useCallback(async () => {
    const answer = await call<HouseholdProfile>(`/api/identity/household?as=${role}`, { method: 'GET' });
    if (answer.ok) setHousehold(answer.value);
  }, [role]);

  // The names and the zone, read at sign-in and every five seconds: the parent may change them in another window.
  useEffect(() => {
    if (!session?.signedIn) return undefined;
    void loadHousehold();
    const timer = setInterval(() => void loadHousehold(), 5000);
    return () => clearInterval(timer);
  }, [session?.signedIn, loadHousehold]);

  // While signed in, the pending list is fetched every second: a new request appears without a reload.
  useEffect(() => {
    if (!session?.signedIn) return undefined;
    let inFlight = false;
    let stopped = false;
    const refresh = async () => {
      if (inFlight) return;
      inFlight = true;
      const only = request === undefined ? '' : `&request=${encodeURIComponent(request)}`;
      const answer = await call<{
        approvals: PendingApproval[];
        calls?: PendingCall[];
        request?: { waiting: boolean };
      }>(`/api/identity/pending?as=${role}${only}`, { method: 'GET' });
      inFlight = false;
      if (stopped) return;
      if (!answer.ok) {
        if (answer.error.startsWith('not signed in')) setSession({ signedIn: false });
        return;
      }
      const now = answer.value.approvals;
      const ids = new Set(now.map((approval) => approval.approvalId));
      const left = shown.current.filter((approval) => !ids.has(approval.approvalId));
      if (left.length > 0) {
        setClosed((previous) => [
          ...left
            // A request this window approved and that is no longer waiting is done: the card leaves.
            .filter(
              (approval) =>
                declinedHere.current.has(approval.approvalId) ||
                !(approval.approvedRoles.includes(role) || approvedHere.current.has(approval.approvalId)),
            )
            .map(
              (approval): ClosedRequest => ({
                approval,
                outcome: declinedHere.current.has(approval.approvalId) ? 'declined-here' : 'gone',
              }),
            ),
          ...previous,
        ]);
      }
      shown.current = now;
      setApprovals(now);
      setCalls(answer.value.calls ?? []);
      setRequestWaiting(answer.value.request?.waiting);
    };
    void refresh();
    const timer = setInterval(() => void refresh(), 1000);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, [session?.signedIn, role, request]);

  const run = async (work: () => Promise<void>) => {
    setBusy(true);
    setProblem(undefined);
    setNotice(undefined);
    try {
      await work();
    } finally {
      setBusy(false);
    }
  };

  const enrol = (event: FormEvent) => {
    event.preventDefault();
    void run(async () => {
      const started = await call<{
        ceremonyId: string;
        options: Parameters<typeof startRegistration>[0]['optionsJSON'];
      }>('/api/identity/registration/options', { method: 'POST', body: { code: code.trim() } });
      if (!started.ok) return setProblem(started.error);
      let response: Awaited<ReturnType<typeof startRegistration>>;
      try {
        response = await startRegistration({ optionsJSON: started.value.options });
      } catch (error) {
        return setProblem(passkeyProblem(error));
      }
      const verified = await call<{ role: Role }>('/api/identity/registration/verify', {
        method: 'POST',
        body: { ceremonyId: started.value.ceremonyId, response },
      });
      if (!verified.ok) return setProblem(verified.error);
      setCode('');
      if (verified.value.role !== role) {
        return setNotice(
          `Enrolled as ${verified.value.role} ✓ — that code was for the ${verified.value.role}: use the ${verified.value.role} window.`,
        );
      }
      setNotice(`Enrolled as ${role} ✓`);
      // The parent names the household at enrollment, now that their session can: a refusal leaves
      // the enrollment as it is and says so; the names can be set again under "Your household".
      const names = Object.fromEntries(
        Object.entries(enrolNames).filter(([, name]) => name.trim() !== '' && role === 'parent'),
      );
      if (Object.keys(names).length > 0) {
        const named = await call('/api/identity/household?as=parent', { method: 'POST', body: { names } });
        if (!named.ok) setProblem(`The names were not saved: ${named.error}. Set them under "Your household".`);
      }
      setEnrolNames({ parent: '', child: '' });
      await loadSession();
    });
  };

  const signIn = () =>
    void run(async () => {
      const started = await call<{
        ceremonyId: string;
        options: Parameters<typeof startAuthentication>[0]['optionsJSON'];
      }>(`/api/identity/sign-in/options?as=${role}`, { method: 'POST' });
      if (!started.ok) return setProblem(started.error);
      let response: Awaited<ReturnType<typeof startAuthentication>>;
      try {
        response = await startAuthentication({ optionsJSON: started.value.options });
      } catch (error) {
        return setProblem(passkeyProblem(error));
      }
      const verified = await call<{ role: Role }>('/api/identity/sign-in/verify', {
        method: 'POST',
        body: { ceremonyId: started.value.ceremonyId, response },
      });
      if (!verified.ok) return setProblem(verified.error);
      if (verified.value.role !== role) {
        return setNotice(
          `That passkey belongs to the ${verified.value.role}: you are signed in to the ${verified.value.role} window.`,
        );
      }
      await loadSession();
    });

  const signOut = () =>
    void run(async () => {
      await call(`/api/identity/sign-out?as=${role}`, { method: 'POST' });
      shown.current = [];
      setApprovals([]);
      setClosed([]);
      setCalls([]);
      setDecidedCalls([]);
      setHousehold(undefined);
      setSession({ signedIn: false });
    });

  const approve = (approvalId: string) =>
    run(async () => {
      const started = await call<{
        ceremonyId: string;
        options: Parameters<typeof startAuthentication>[0]['optionsJSON'];
      }>(`/api/identity/approval/options?as=${role}`, { method: 'POST', body: { approvalId } });
      if (!started.ok) return setProblem(started.error);
      let response: Awaited<ReturnType<typeof startAuthentication>>;
      try {
        response = await startAuthentication({ optionsJSON: started.value.options });
      } catch (error) {
        return setProblem(passkeyProblem(error));
      }
      const verified = await call(`/api/identity/approval/verify?as=${role}`, {
        method: 'POST',
        body: { ceremonyId: started.value.ceremonyId, response },
      });
      if (!verified.ok) return setProblem(verified.error);
      approvedHere.current.add(approvalId);
      setNotice('Approved ✓ — your signed approval was sent.');
      setApprovals((current) =>
        current.map((approval) =>
          approval.approvalId === approvalId
            ? { ...approval, approvedRoles: [...approval.approvedRoles, role] }
            : approval,
        ),
      );
    });

  const approveCall = (pending: PendingCall) =>
    run(async () => {
      const started = await call<{
        ceremonyId: string;
        options: Parameters<typeof startAuthentication>[0]['optionsJSON'];
      }>(`/api/identity/call-approval/options?as=${role}`, { method: 'POST', body: { requestId: pending.requestId } });
      if (!started.ok) return setProblem(started.error);
      let response: Awaited<ReturnType<typeof startAuthentication>>;
      try {
        response = await startAuthentication({ optionsJSON: started.value.options });
      } catch (error) {
        return setProblem(passkeyProblem(error));
      }
      const verified = await call(`/api/identity/call-approval/verify?as=${role}`, {
        method: 'POST',
        body: { ceremonyId: started.value.ceremonyId, response },
      });
      if (!verified.ok) return setProblem(verified.error);
      setDecidedCalls((previous) => [{ call: pending, outcome: 'approved-here' }, ...previous]);
    });

  const declineCall = (pending: PendingCall) =>
    run(async () => {
      const answer = await call(`/api/identity/call-decline?as=${role}`, {
        method: 'POST',
        body: { requestId: pending.requestId },
      });
      if (!answer.ok) return setProblem(answer.error);
      setDecidedCalls((previous) => [{ call: pending, outcome: 'declined-here' }, ...previous]);
    });

  const decline = (approvalId: string) =>
    run(async () => {
      const answer = await call(`/api/identity/decline?as=${role}`, { method: 'POST', body: { approvalId } });
      if (!answer.ok) return setProblem(answer.error);
      declinedHere.current.add(approvalId);
      setNotice('Declined. Nothing will be charged for that order.');
    });

  const title = role === 'child' ? "Child's approval window" : "Parent's approval window";
  const myName = household?.members[role];
  return (
    <>
      <SiteHeader subtitle={title}>
        {session?.signedIn && (
          <div className="flex items-center gap-3 text-sm">
            <span className="rounded-full bg-emerald-50 px-3 py-1 text-emerald-900">
              {myName === undefined ? (
                `Signed in as ${role}`
              ) : (
                <>
                  Signed in as <bdi>{myName}</bdi> ({role})
                </>
              )}
            </span>
            <button
              type="button"
              onClick={signOut}
              disabled={busy}
              className="text-sky-800 underline underline-offset-2"
            >
              Sign out
            </button>
          </div>
        )}
      </SiteHeader>
      <main className="mx-auto max-w-2xl px-4 py-6">
        <h1 className="text-2xl font-semibold">{title}</h1>
        <p className="mt-1 text-slate-700">
          Every amount, item and address here is read from the invoice the shop signed — never from what the agent
          wrote.
        </p>
        <div aria-live="polite" className="mt-3 space-y-2">
          {notice && <p className="rounded-md bg-emerald-50 px-3 py-2 text-emerald-900">{notice}</p>}
          {problem && (
            <p role="alert" className="rounded-md bg-amber-50 px-3 py-2 text-amber-900">
              {problem}
            </p>
          )}
        </div>

        {session === undefined && <p className="mt-6 text-slate-600">Checking your session…</p>}

        {session?.signedIn === false && (
          <div className="mt-6 grid gap-4">
            <section aria-labelledby="sign-in-title" className="rounded-xl border border-slate-200 bg-white p-4">
              <h2 id="sign-in-title" className="text-lg font-semibold">
                Sign in with your passkey
              </h2>
              <p className="mt-1 text-sm text-slate-700">
                Already enrolled as the {role}? Use the passkey you registered.
              </p>
              <button
                type="button"
                onClick={signIn}
                disabled={busy}
                className="mt-3 rounded-lg bg-sky-800 px-4 py-2 font-medium text-white hover:bg-sky-900 disabled:opacity-60"
              >
                Sign in with passkey
              </button>
            </section>
            <section aria-labelledby="enrol-title" className="rounded-xl border border-slate-200 bg-white p-4">
              <h2 id="enrol-title" className="text-lg font-semibold">
                First time here?
              </h2>
              <form onSubmit={enrol} className="mt-2">
                {role === 'parent' && (
                  <div className="mb-3 grid grid-cols-[auto_1fr] items-center gap-2">
                    <NameField
                      id="enrol-parent-name"
                      label="Your name"
                      autoComplete="given-name"
                      value={enrolNames.parent}
                      onChange={(parent) => setEnrolNames((names) => ({ ...names, parent }))}
                    />
                    <NameField
                      id="enrol-child-name"
                      label="Your child's name"
                      value={enrolNames.child}
                      onChange={(child) => setEnrolNames((names) => ({ ...names, child }))}
                    />
                    <p className="col-span-2 text-sm text-slate-600">
                      Optional: the windows say "the parent" and "your child" until you name them.
                    </p>
                  </div>
                )}
                <label htmlFor="enrol-code" className="block text-sm text-slate-700">
                  Enter the enrollment code printed in the terminal
                </label>
                <div className="mt-1 flex gap-2">
                  <input
                    id="enrol-code"
                    name="code"
                    autoComplete="one-time-code"
                    required
                    maxLength={100}
                    value={code}
                    onChange={(event) => setCode(event.target.value)}
                    className="flex-1 rounded-md border border-slate-300 px-3 py-2 font-mono"
                  />
                  <button
                    type="submit"
                    disabled={busy || code.trim() === ''}
                    className="rounded-lg border border-slate-300 bg-white px-4 py-2 font-medium hover:bg-slate-100 disabled:opacity-60"
                  >
                    Register a passkey
                  </button>
                </div>
              </form>
            </section>
          </div>
        )}

        {session?.signedIn && (
          <section aria-labelledby="waiting-title" className="mt-6">
            <h2 id="waiting-title" className="sr-only">
              Orders waiting for you
            </h2>
            {request !== undefined && (
              <p className="mb-3 text-sm text-slate-700">
                This window was opened for one request.{' '}
                <a className="text-sky-800 underline underline-offset-2" href={`/approve?as=${role}`}>
                  Show everything waiting for you
                </a>
              </p>
            )}
            {approvals.length === 0 &&
              calls.length === 0 &&
              decidedCalls.length === 0 &&
              closed.length === 0 &&
              (request === undefined ? (
                <p
                  role="status"
                  className="rounded-xl border border-dashed border-slate-300 p-6 text-center text-slate-600"
                >
                  No orders are waiting for you.
                </p>
              ) : (
                requestWaiting === false && (
                  <p
                    role="status"
                    className="rounded-xl border border-dashed border-slate-300 p-6 text-center text-slate-600"
                  >
                    This request is not waiting for the {role}. It was decided or expired already, or it was never for
                    this window.
                  </p>
                )
              ))}
            <div className="space-y-4">
              {calls
                .filter((pending) => !decidedCalls.some((decided) => decided.call.requestId === pending.requestId))
                .map((pending) => (
                  <GatedCallCard
                    key={pending.requestId}
                    call={pending}
                    role={role}
                    busy={busy}
                    onApprove={() => void approveCall(pending)}
                    onDecline={() => void declineCall(pending)}
                  />
                ))}
              {decidedCalls.map(({ call: decided, outcome }) => (
                <GatedCallCard
                  key={`decided-${decided.requestId}`}
                  call={decided}
                  role={role}
                  busy={busy}
                  outcome={outcome}
                />
              ))}
              {approvals.map((approval) => (
                <PendingApprovalCard
                  key={approval.approvalId}
                  approval={approval}
                  role={role}
                  busy={busy}
                  onApprove={() => void approve(approval.approvalId)}
                  onDecline={() => void decline(approval.approvalId)}
                />
              ))}
              {closed.map(({ approval, outcome }) => (
                <PendingApprovalCard
                  key={`closed-${approval.approvalId}`}
                  approval={approval}
                  role={role}
                  busy={busy}
                  closed={outcome}
                  onDismiss={() => setClosed((all) => all.filter((other) => other.approval !== approval))}
                />
              ))}
            </div>
          </section>
        )}
        {session?.signedIn && role === 'parent' && request === undefined && household !== undefined && (
          <>
            <HouseholdSection profile={household} onSaved={setHousehold} />
            <AllowancesSection
              members={household.members}
              timeZone={household.timeZone}
              onStale={() => void loadHousehold()}
            />
          </>
        )}
      </main>
    </>
  );
}
