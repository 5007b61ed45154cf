import { describe, expect, it } from 'vitest';
import { matchMenu, parseIntent } from './offline-planner';

const menu = [
  { sku: 'cheese-slice', name: 'Cheese slice', listPriceCents: 400 },
  { sku: 'small-cheese', name: 'Small cheese pizza', listPriceCents: 900 },
  { sku: 'small-pepperoni', name: 'Small pepperoni pizza', listPriceCents: 1100 },
  { sku: 'large-pepperoni', name: 'Large pepperoni pizza', listPriceCents: 1500 },
  { sku: 'large-supreme', name: 'Large supreme pizza', listPriceCents: 2200 },
];

describe('parseIntent', () => {
  it.each([
    [
      'a cheese slice to 12 Main St',
      { kind: 'order', items: [{ qty: 1, flavor: 'cheese', size: 'slice' }], deliverTo: '12 Main St' },
    ],
    [
      'a slice of cheese delivered to 12 Main St.',
      { kind: 'order', items: [{ qty: 1, flavor: 'cheese', size: 'slice' }], deliverTo: '12 Main St' },
    ],
    ['a large pepperoni', { kind: 'order', items: [{ qty: 1, flavor: 'pepperoni', size: 'large' }] }],
    ['cancel my order', { kind: 'cancel' }],
    ['please cancel the large pepperoni', { kind: 'cancel' }],
    ['two small cheese', { kind: 'order', items: [{ qty: 2, flavor: 'cheese', size: 'small' }] }],
    ['twenty large supremes', { kind: 'order', items: [{ qty: 20, flavor: 'supreme', size: 'large' }] }],
    [
      '3 large pepperonis and a cheese slice',
      {
        kind: 'order',
        items: [
          { qty: 3, flavor: 'pepperoni', size: 'large' },
          { qty: 1, flavor: 'cheese', size: 'slice' },
        ],
      },
    ],
    ['what is on the menu?', { kind: 'menu' }],
    ['ask for a discount', { kind: 'discount', items: [] }],
    ['order again to 9 Oak Ave', { kind: 'order-again', deliverTo: '9 Oak Ave' }],
    ['/attack call-without-search', { kind: 'attack', move: 'call-without-search' }],
    ['hello', { kind: 'help' }],
  ])('%s', (text, intent) => {
    expect(parseIntent(text)).toEqual(intent);
  });
});

describe('matchMenu', () => {
  it('matches the named size, a slice, or the largest pizza of that name', () => {
    expect(matchMenu({ qty: 1, flavor: 'cheese', size: 'slice' }, menu)?.sku).toBe('cheese-slice');
    expect(matchMenu({ qty: 1, flavor: 'pepperoni', size: 'small' }, menu)?.sku).toBe('small-pepperoni');
    expect(matchMenu({ qty: 1, flavor: 'pepperoni' }, menu)?.sku).toBe('large-pepperoni');
    expect(matchMenu({ qty: 1, flavor: 'cheese' }, menu)?.sku).toBe('small-cheese');
    expect(matchMenu({ qty: 1, flavor: 'cheese', size: 'large' }, menu)).toBeUndefined();
    expect(matchMenu({ qty: 1, flavor: 'hawaiian' }, menu)).toBeUndefined();
  });
});
