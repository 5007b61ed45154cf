import type { Metadata } from 'next/types';
import { ApproveWindow } from '../_ui/approve-window';
import { SiteHeader } from '../_ui/site-header';

export const metadata: Metadata = { title: 'Approval window — Order Pizza' };

/**
 * `/approve?as=child|parent[&request=<id>]`: the approval window of one role. `?as=` only picks
 * which role's session the page shows; `&request=` narrows it to the one request a URL ask named.
 */
export default async function ApprovePage({
  searchParams,
}: {
  readonly searchParams: Promise<Record<string, string | string[] | undefined>>;
}) {
  const { as, request } = await searchParams;
  if (as === 'child' || as === 'parent')
    return typeof request === 'string' && request !== '' ? (
      <ApproveWindow role={as} request={request} />
    ) : (
      <ApproveWindow role={as} />
    );
  return (
    <>
      <SiteHeader subtitle="Approval window" />
      <main className="mx-auto max-w-xl px-4 py-10">
        <h1 className="text-2xl font-semibold">Which window is this?</h1>
        <p className="mt-2 text-slate-700">Each member of the household approves in their own window.</p>
        <ul className="mt-4 flex gap-3">
          <li>
            <a className="rounded-lg bg-sky-800 px-4 py-2 font-medium text-white" href="/approve?as=child">
              Child window
            </a>
          </li>
          <li>
            <a className="rounded-lg bg-sky-800 px-4 py-2 font-medium text-white" href="/approve?as=parent">
              Parent window
            </a>
          </li>
        </ul>
      </main>
    </>
  );
}
