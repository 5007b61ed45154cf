import type { ReactNode } from 'react';

/** The header every page shares: product name, what this page is, and the links between windows. */
export function SiteHeader({ subtitle, children }: { readonly subtitle: string; readonly children?: ReactNode }) {
  return (
    <header className="border-b border-slate-200 bg-white">
      <div className="mx-auto flex max-w-5xl flex-wrap items-center gap-x-6 gap-y-2 px-4 py-3">
        <div className="flex items-baseline gap-3">
          <a href="/" className="text-lg font-bold tracking-tight text-slate-900">
            Order Pizza
          </a>
          <span className="text-sm text-slate-600">{subtitle}</span>
        </div>
        {children}
        <nav aria-label="Windows" className="ml-auto">
          <ul className="flex flex-wrap gap-x-4 gap-y-1 text-sm">
            <li>
              <a
                className="text-sky-800 underline-offset-2 hover:underline"
                href="/approve?as=child"
                target="_blank"
                rel="noreferrer"
              >
                Child window
              </a>
            </li>
            <li>
              <a
                className="text-sky-800 underline-offset-2 hover:underline"
                href="/approve?as=parent"
                target="_blank"
                rel="noreferrer"
              >
                Parent window
              </a>
            </li>
            <li>
              <a
                className="text-sky-800 underline-offset-2 hover:underline"
                href="/log"
                target="_blank"
                rel="noreferrer"
              >
                Live log
              </a>
            </li>
            <li>
              <a
                className="text-sky-800 underline-offset-2 hover:underline"
                href="/audit"
                target="_blank"
                rel="noreferrer"
              >
                Audit
              </a>
            </li>
          </ul>
        </nav>
      </div>
    </header>
  );
}
