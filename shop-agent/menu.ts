/** One menu entry: list price in USD cents. */
export type MenuItem = {
  readonly sku: string;
  readonly name: string;
  readonly listPriceCents: number;
};

/**
 * The shop's menu (SPEC §6), list prices in USD cents. Enough spread to exercise the
 * household's ≤ $10, $10–$200 and > $200 approval tiers with quantities.
 */
export const MENU: readonly MenuItem[] = Object.freeze([
  { sku: 'cheese-slice', name: 'Cheese slice', listPriceCents: 400 },
  { sku: 'small-cheese', name: 'Small cheese pizza', listPriceCents: 900 },
  { sku: 'small-pepperoni', name: 'Small pepperoni pizza', listPriceCents: 1100 },
  { sku: 'large-pepperoni', name: 'Large pepperoni pizza', listPriceCents: 1500 },
  { sku: 'large-hawaiian', name: 'Large hawaiian pizza', listPriceCents: 2000 },
  { sku: 'large-supreme', name: 'Large supreme pizza', listPriceCents: 2200 },
]);
