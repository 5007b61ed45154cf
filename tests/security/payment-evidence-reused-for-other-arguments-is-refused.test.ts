import { afterEach, describe, expect, it } from 'vitest';
import { governedRail, payArguments, receiptText } from '../policy/governed-rail';
import { textOf } from '../proxy/helpers';

// SPEC §4.7: a retry with the same evidence and arguments is answered with the first receipt, but
// evidence reused for different arguments (another amount, another payee, an extra argument) is
// refused as used: never dispatched, never answered with the first call's receipt, never told to wait.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const reused = 'This evidence has already been used for a different call.';

describe('payment evidence reused for other arguments', () => {
  it.each([
    ['another amount', { amountCents: 400 }],
    ['another payee', { payee: 'did:web:attacker.example' }],
    ['an extra argument', { memo: 'and again' }],
  ])('spent evidence with %s is refused as used, not replayed', async (_label, change) => {
    const governed = await governedRail();
    cleanups.push(() => governed.close());
    const args = payArguments(500, 'urn:uuid:reuse-spent');
    expect(textOf(await governed.pay(args))).toBe(receiptText(1));
    const tampered = await governed.pay({ ...args, ...change });
    expect(tampered.isError).toBe(true);
    expect(textOf(tampered)).toContain(reused);
    expect(textOf(tampered)).not.toContain(receiptText(1));
    expect(governed.rail.calls).toHaveLength(1);
  });

  it('in-doubt evidence with another amount is refused as used, not told to wait', async () => {
    const governed = await governedRail({ callTimeoutMs: 200 });
    cleanups.push(() => governed.close());
    const args = payArguments(500, 'urn:uuid:reuse-in-doubt');
    governed.rail.mode = 'hang';
    await governed.pay(args);
    governed.rail.mode = 'succeed';
    const tampered = await governed.pay({ ...args, amountCents: 400 });
    expect(textOf(tampered)).toContain(reused);
    expect(governed.rail.calls).toHaveLength(1);
  });
});
