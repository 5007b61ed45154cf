import { connection } from 'next/server';
import type { Metadata } from 'next/types';
import type { ReactNode } from 'react';
import './globals.css';

export const metadata: Metadata = {
  title: 'Order Pizza',
  description: 'An agent orders pizza; the household approves with passkeys; the proxy enforces the rules in code.',
};

/**
 * The page frame: dark text on a light background, system fonts (no network). Every page renders
 * per request: Next.js stamps its scripts with the request's CSP nonce only when it renders, so a
 * page prerendered at build time would carry no nonce and its scripts would be refused.
 */
export default async function RootLayout({ children }: { readonly children: ReactNode }) {
  await connection();
  return (
    <html lang="en">
      <body className="min-h-screen bg-slate-50 font-sans text-slate-900 antialiased">{children}</body>
    </html>
  );
}
