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
});
