import { describe, expect, it } from 'vitest';
import { MENU } from './menu.js';
import { checkPolicyFloor, floorPriceCents, type OrderRequest } from './policy-floor.js';

const codes = (request: OrderRequest) => {
  const decision = checkPolicyFloor(request, MENU);
  return decision.ok ? [] : decision.violations.map((violation) => violation.code);
};

describe('checkPolicyFloor', () => {
  it('signs list price and fills in names, list prices and the total', () => {
    const decision = checkPolicyFloor(
      {
        items: [
          { sku: 'large-pepperoni', qty: 2 },
          { sku: 'cheese-slice', qty: 1 },
        ],
      },
      MENU,
    );
    expect(decision).toEqual({
      ok: true,
      terms: {
        items: [
          { sku: 'large-pepperoni', name: 'Large pepperoni pizza', qty: 2, unitPriceCents: 1500, listPriceCents: 1500 },
          { sku: 'cheese-slice', name: 'Cheese slice', qty: 1, unitPriceCents: 400, listPriceCents: 400 },
        ],
        totalCents: 3400,
        currency: 'usd',
      },
    });
  });

  it('uses ceil(70% of list) as the floor', () => {
    expect(floorPriceCents(1500)).toBe(1050);
    expect(floorPriceCents(1)).toBe(1);
    expect(floorPriceCents(333)).toBe(234); // 233.1 rounds up
  });

  it('signs exactly 30% off and refuses one cent less', () => {
    expect(codes({ items: [{ sku: 'large-pepperoni', qty: 1, unitPriceCents: 1050 }] })).toEqual([]);
    expect(codes({ items: [{ sku: 'large-pepperoni', qty: 1, unitPriceCents: 1049 }] })).toEqual(['price_below_floor']);
  });

  it.each([
    ['31% off', { items: [{ sku: 'large-supreme', qty: 1, unitPriceCents: 1518 }] }, ['price_below_floor']],
    ['above list', { items: [{ sku: 'cheese-slice', qty: 1, unitPriceCents: 401 }] }, ['price_above_list']],
    ['off-menu item', { items: [{ sku: 'truck', qty: 1, unitPriceCents: 100 }] }, ['unknown_sku']],
    ['qty 0', { items: [{ sku: 'cheese-slice', qty: 0 }] }, ['qty_out_of_range']],
    ['qty 21', { items: [{ sku: 'cheese-slice', qty: 21 }] }, ['qty_out_of_range']],
    ['fractional qty', { items: [{ sku: 'cheese-slice', qty: 1.5 }] }, ['qty_out_of_range']],
    ['fractional price', { items: [{ sku: 'cheese-slice', qty: 1, unitPriceCents: 399.5 }] }, ['invalid_price']],
    ['wrong total', { items: [{ sku: 'cheese-slice', qty: 2 }], totalCents: 100 }, ['wrong_total']],
    [
      'over $500',
      {
        items: [
          { sku: 'large-supreme', qty: 20 },
          { sku: 'large-hawaiian', qty: 20 },
        ],
      },
      ['total_over_limit'],
    ],
    ['other currency', { items: [{ sku: 'cheese-slice', qty: 1 }], currency: 'eur' }, ['wrong_currency']],
    ['no items', { items: [] }, ['no_items']],
  ] as const)('refuses %s', (_name, request, expected) => {
    expect(codes(request as OrderRequest)).toEqual(expected);
  });

  it('reports every violation at once, with the offending line', () => {
    const decision = checkPolicyFloor(
      {
        items: [
          { sku: 'cheese-slice', qty: 0, unitPriceCents: 1 },
          { sku: 'nope', qty: 1 },
        ],
        totalCents: 5,
      },
      MENU,
    );
    expect(decision.ok).toBe(false);
    if (decision.ok) return;
    expect(decision.violations.map(({ code, line }) => ({ code, line }))).toEqual([
      { code: 'qty_out_of_range', line: 0 },
      { code: 'price_below_floor', line: 0 },
      { code: 'unknown_sku', line: 1 },
      { code: 'wrong_total', line: undefined },
    ]);
  });

  it('accepts a stated total equal to the sum and exactly $500', () => {
    // 20 × 2200 + 3 × 2000 = 50 000 cents.
    expect(
      codes({
        items: [
          { sku: 'large-supreme', qty: 20 },
          { sku: 'large-hawaiian', qty: 3 },
        ],
        totalCents: 50_000,
        currency: 'usd',
      }),
    ).toEqual([]);
  });

  it.each([
    ['a right-to-left override', '\u202e12 Main St', 'U+202E'],
    ['a C0 control', '12 Main St\u0007', 'U+0007'],
    ['a newline', '12 Main St\nApt 4', 'U+000A'],
    ['a C1 control', '12 Main\u0085St', 'U+0085'],
    ['a zero-width space', '12 Ma\u200bin St', 'U+200B'],
    ['a first-strong isolate', '12 \u2068Main St', 'U+2068'],
    ['an invisible tag character', '12 Main St\u{E0041}', 'U+E0041'],
    ['a line separator', '12 Main St\u2028', 'U+2028'],
    ['a paragraph separator', '12\u2029Main St', 'U+2029'],
  ])('refuses a delivery address with %s, naming the character', (_name, deliverTo, named) => {
    const decision = checkPolicyFloor({ items: [{ sku: 'cheese-slice', qty: 1 }], deliverTo }, MENU);
    expect(decision.ok).toBe(false);
    if (decision.ok) return;
    expect(decision.violations).toEqual([{ code: 'ambiguous_text', message: expect.stringContaining(named) }]);
  });

  it('signs plain addresses in any script, with accents, emoji and ordinary spaces', () => {
    for (const deliverTo of ['12 Main St', 'Königstraße 5, München', 'רחוב הרצל 12', '東京都 1-2-3', '12 Main St 🍕']) {
      expect(codes({ items: [{ sku: 'cheese-slice', qty: 1 }], deliverTo })).toEqual([]);
    }
  });

  it('refuses to sign a menu name that carries a format character', () => {
    const menu = [{ sku: 'cheese-slice', name: 'Cheese\u202e slice', listPriceCents: 400 }];
    expect(codes({ items: [{ sku: 'cheese-slice', qty: 1 }] }).length).toBe(0);
    const decision = checkPolicyFloor({ items: [{ sku: 'cheese-slice', qty: 1 }] }, menu);
    expect(decision.ok ? [] : decision.violations.map(({ code, line }) => ({ code, line }))).toEqual([
      { code: 'ambiguous_text', line: 0 },
    ]);
  });
});
