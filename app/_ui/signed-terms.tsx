import { formatMoney, shortDid } from './format';
import { SignedText } from './signed-text';

/** The invoice lines as the merchant signed them. */
export interface SignedLine {
  readonly name: string;
  readonly qty: number;
  readonly unitPriceCents: number;
}

/**
 * Who signed the terms and every line with its total, exactly as decoded from the merchant-signed
 * invoice: the chat's order card and the approval window show the same table. Signed text is
 * shown with any hidden character as a visible escape (SignedText).
 */
export function SignedTerms({
  title,
  merchantName,
  merchantDid,
  items,
  totalCents,
}: {
  readonly title: React.ReactNode;
  readonly merchantName: string;
  readonly merchantDid: string;
  readonly items: readonly SignedLine[];
  readonly totalCents: number;
}) {
  return (
    <>
      <header className="flex flex-wrap items-baseline justify-between gap-2">
        {title}
        <p className="text-sm text-emerald-800">
          signed by <SignedText text={merchantName} />{' '}
          <span title={merchantDid} className="font-mono">
            ({shortDid(merchantDid)})
          </span>{' '}
          ✓
        </p>
      </header>
      <table className="mt-3 w-full text-sm">
        <caption className="sr-only">Items on the signed invoice</caption>
        <thead className="text-left text-slate-600">
          <tr>
            <th scope="col" className="py-1 font-medium">
              Item
            </th>
            <th scope="col" className="py-1 text-right font-medium">
              Qty
            </th>
            <th scope="col" className="py-1 text-right font-medium">
              Each
            </th>
            <th scope="col" className="py-1 text-right font-medium">
              Amount
            </th>
          </tr>
        </thead>
        <tbody>
          {items.map((item) => (
            <tr key={`${item.name}-${item.qty}-${item.unitPriceCents}`} className="border-t border-slate-100">
              <td className="py-1">
                <SignedText text={item.name} />
              </td>
              <td className="py-1 text-right tabular-nums">{item.qty}</td>
              <td className="py-1 text-right tabular-nums">{formatMoney(item.unitPriceCents)}</td>
              <td className="py-1 text-right tabular-nums">{formatMoney(item.unitPriceCents * item.qty)}</td>
            </tr>
          ))}
        </tbody>
        <tfoot>
          <tr className="border-t border-slate-300 font-semibold">
            <th scope="row" colSpan={3} className="py-1 text-left">
              Total
            </th>
            <td className="py-1 text-right tabular-nums">{formatMoney(totalCents)}</td>
          </tr>
        </tfoot>
      </table>
    </>
  );
}
