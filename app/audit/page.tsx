import type { Metadata } from 'next/types';
import { getHouseholdApp } from '@/lib/index';
import { AuditUnavailable, OrderList } from '../_ui/audit-views';
import { SiteHeader } from '../_ui/site-header';

export const metadata: Metadata = { title: 'Audit — Order Pizza' };
export const dynamic = 'force-dynamic';

/** `/audit`: the household's orders, newest first, each linking to its re-verified evidence chain. */
export default async function AuditPage() {
  const app = await getHouseholdApp().catch(() => undefined);
  return (
    <>
      <SiteHeader subtitle="Audit" />
      {app === undefined ? <AuditUnavailable /> : <OrderList orders={await app.audit.listOrders()} />}
    </>
  );
}
