import type { Metadata } from 'next/types';
import { LiveLog } from '../_ui/live-log';
import { SiteHeader } from '../_ui/site-header';

export const metadata: Metadata = { title: 'Live log — Order Pizza' };

/** `/log`: every decision as it happens; `?session=&order=&kind=&outcome=` start it filtered. */
export default async function LogPage({
  searchParams,
}: {
  readonly searchParams: Promise<Record<string, string | string[] | undefined>>;
}) {
  const query = await searchParams;
  const first = (name: string) => {
    const value = query[name];
    return (Array.isArray(value) ? value[0] : value)?.trim() ?? '';
  };
  return (
    <>
      <SiteHeader subtitle="Live log" />
      <LiveLog
        initial={{ session: first('session'), order: first('order'), kind: first('kind'), outcome: first('outcome') }}
      />
    </>
  );
}
