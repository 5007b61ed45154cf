import type { Metadata } from 'next/types';
import { getHouseholdApp } from '@/lib/index';
import { AuditUnavailable, OrderChain, OrderNotFound } from '../../_ui/audit-views';
import { SiteHeader } from '../../_ui/site-header';

export const metadata: Metadata = { title: 'Order audit — Order Pizza' };
export const dynamic = 'force-dynamic';

/** `/audit/<order>`: one order's evidence chain, every signature re-verified by Veramo on this request. */
export default async function OrderAuditPage({ params }: { readonly params: Promise<{ readonly order: string }> }) {
  const { order } = await params;
  const invoiceId = decoded(order);
  const app = await getHouseholdApp().catch(() => undefined);
  const view = app === undefined ? undefined : await app.audit.auditOrder(invoiceId);
  return (
    <>
      <SiteHeader subtitle="Audit" />
      {app === undefined ? (
        <AuditUnavailable />
      ) : view === undefined ? (
        <OrderNotFound invoiceId={invoiceId} />
      ) : (
        <OrderChain view={view} />
      )}
    </>
  );
}

/** The order id from the path; a malformed escape is simply an id no order has. */
function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
