import type { AuditLink, OrderAuditView, OrderSummary } from '@/lib/index';
import { formatMoney, relativeTime, shortDid } from './format';

const statusWords: Record<OrderSummary['status'], string> = {
  pending: 'waiting for approval',
  approved: 'approved, not paid yet',
  declined: 'declined',
  expired: 'expired',
  settled: 'paid',
  fulfilled: 'paid and committed to deliver',
};

/** The audit list: every order with its state and total, newest first. */
export function OrderList({ orders }: { readonly orders: readonly OrderSummary[] }) {
  const now = Date.now();
  return (
    <main className="mx-auto max-w-5xl px-4 py-6">
      <h1 className="text-2xl font-semibold">Audit</h1>
      <p className="mt-1 text-slate-700">
        Each order's evidence chain — terms signed by the merchant, each passkey approval, the payment receipt and the
        delivery commitment — re-verified by an independent verifier when you open it.
      </p>
      {orders.length === 0 ? (
        <p className="mt-6 rounded-lg border border-slate-200 bg-white p-4 text-slate-700">
          No orders yet: start one in the <a href="/">chat</a>.
        </p>
      ) : (
        <table className="mt-6 w-full border-collapse overflow-hidden rounded-lg border border-slate-200 bg-white text-left">
          <thead className="bg-slate-100 text-sm">
            <tr>
              <th scope="col" className="px-3 py-2">
                Order
              </th>
              <th scope="col" className="px-3 py-2">
                Merchant
              </th>
              <th scope="col" className="px-3 py-2">
                Total
              </th>
              <th scope="col" className="px-3 py-2">
                State
              </th>
              <th scope="col" className="px-3 py-2">
                Created
              </th>
            </tr>
          </thead>
          <tbody>
            {orders.map((order) => (
              <tr key={order.invoiceId} className="border-t border-slate-200" data-order={order.invoiceId}>
                <td className="px-3 py-2 font-mono text-sm">
                  <a
                    className="text-sky-800 underline underline-offset-2"
                    href={`/audit/${encodeURIComponent(order.invoiceId)}`}
                  >
                    {order.invoiceId.replace(/^urn:uuid:/, '').slice(0, 8)}…
                  </a>
                </td>
                <td className="px-3 py-2">{order.merchantName}</td>
                <td className="px-3 py-2">{formatMoney(order.totalCents)}</td>
                <td className="px-3 py-2">{statusWords[order.status]}</td>
                <td className="px-3 py-2" title={new Date(order.createdAt).toISOString()}>
                  {relativeTime(order.createdAt, now)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}

const stepNames: Record<AuditLink['step'], string> = {
  terms: 'Terms',
  approval: 'Approval',
  allowance: 'Allowance',
  receipt: 'Payment',
  commitment: 'Delivery',
};

/** One order's chain as linked steps, each with its re-verification and what it binds. */
export function OrderChain({ view }: { readonly view: OrderAuditView }) {
  const failed = view.links.filter((link) => !link.check.verified).length;
  return (
    <main className="mx-auto max-w-5xl px-4 py-6">
      <p className="text-sm">
        <a className="text-sky-800 underline underline-offset-2" href="/audit">
          ← All orders
        </a>
      </p>
      <h1 className="mt-2 text-2xl font-semibold">
        {formatMoney(view.totalCents)} from {view.merchantName}
      </h1>
      <p className="mt-1 font-mono text-sm text-slate-700">{view.invoiceId}</p>
      <p
        className={`mt-3 rounded-lg border p-3 font-medium ${
          failed === 0 ? 'border-emerald-300 bg-emerald-50 text-emerald-900' : 'border-red-300 bg-red-50 text-red-900'
        }`}
        data-chain={failed === 0 ? 'verified' : 'failed'}
      >
        {failed === 0
          ? `Every signature verified (${view.links.length} of ${view.links.length}) — ${statusWords[view.status]}.`
          : `${failed} of ${view.links.length} signatures failed verification.`}
      </p>
      <ol className="mt-6 space-y-4">
        {view.links.map((link) => (
          <ChainLink key={link.jws} link={link} checkedAt={view.checkedAt} />
        ))}
        {view.pending.map((step) => (
          <li key={step} className="rounded-lg border border-dashed border-slate-300 bg-white p-4 text-slate-600">
            Not yet: {step}.
          </li>
        ))}
      </ol>
      <p className="mt-6 text-sm">
        <a
          className="text-sky-800 underline underline-offset-2"
          href={`/log?order=${encodeURIComponent(view.invoiceId)}`}
        >
          This order's decisions in the live log
        </a>
      </p>
    </main>
  );
}

function ChainLink({ link, checkedAt }: { readonly link: AuditLink; readonly checkedAt: string }) {
  const verified = link.check.verified;
  return (
    <li
      className={`rounded-lg border bg-white p-4 ${verified ? 'border-slate-200' : 'border-red-400 bg-red-50'}`}
      data-step={link.step}
      data-verified={verified ? 'yes' : 'no'}
    >
      <div className="flex flex-wrap items-baseline justify-between gap-2">
        <h2 className="text-lg font-semibold">
          <span className="mr-2 text-sm font-medium uppercase tracking-wide text-slate-600">
            {stepNames[link.step]}
          </span>
          {link.title}
        </h2>
        <p
          className={`font-semibold ${verified ? 'text-emerald-800' : 'text-red-800'}`}
          title={`checked at ${checkedAt}`}
        >
          {link.check.verified ? 'verified ✓ just now' : `failed ✗ ${link.check.reason}`}
        </p>
      </div>
      <p className="mt-1 text-sm text-slate-700">
        Signed by{' '}
        <span className="font-mono" title={link.signer}>
          {shortDid(link.signer)}
        </span>
      </p>
      <dl className="mt-3 grid grid-cols-[max-content_1fr] gap-x-4 gap-y-1 text-sm">
        {link.binds.map((bind) => (
          <div key={bind.label} className="contents">
            <dt className="text-slate-600">{bind.label}</dt>
            <dd className="break-all font-mono">{bind.value}</dd>
          </div>
        ))}
      </dl>
      <details className="mt-3 text-sm">
        <summary className="cursor-pointer text-sky-800">Show the signed JWS</summary>
        <pre className="mt-2 whitespace-pre-wrap break-all rounded bg-slate-100 p-2 font-mono text-xs">{link.jws}</pre>
      </details>
    </li>
  );
}

/** The household did not start: say so in words. */
export function AuditUnavailable() {
  return (
    <main className="mx-auto max-w-5xl px-4 py-6">
      <h1 className="text-2xl font-semibold">Audit</h1>
      <p className="mt-2 text-slate-700">The household did not start; the server terminal says why.</p>
    </main>
  );
}

/** No order has this id. */
export function OrderNotFound({ invoiceId }: { readonly invoiceId: string }) {
  return (
    <main className="mx-auto max-w-5xl px-4 py-6">
      <h1 className="text-2xl font-semibold">No such order</h1>
      <p className="mt-2 text-slate-700">
        This household has no order <span className="font-mono">{invoiceId}</span>.{' '}
        <a className="text-sky-800 underline underline-offset-2" href="/audit">
          All orders
        </a>
      </p>
    </main>
  );
}
