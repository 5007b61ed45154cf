import { afterEach, describe, expect, it } from 'vitest';
import { PAYMENT_IN_PROGRESS_REASON } from '../../proxy/index';
import { governedRail, payArguments } from '../policy/governed-rail';
import { textOf } from '../proxy/helpers';

// SPEC §4.7: a payment whose call timed out may have been charged. Its evidence is in doubt with
// no lease, so neither waiting past the lease nor retrying many times at once sends it again.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('a payment retried after its call timed out', () => {
  it('is never sent twice, however often and however late the model retries', async () => {
    const governed = await governedRail({ callTimeoutMs: 200 });
    cleanups.push(() => governed.close());
    const args = payArguments(500, 'urn:uuid:retried-after-timeout');
    governed.rail.mode = 'hang';
    expect(textOf(await governed.pay(args))).toContain('The outcome is unknown');
    governed.rail.mode = 'succeed';
    // Past the 60 s lease, then past the evidence's own exp (14 minutes on): in doubt is never freed by time.
    for (const minutes of [1, 5, 13]) {
      governed.clock.ms += minutes * 60_000;
      const retries = await Promise.all(Array.from({ length: 10 }, () => governed.pay(args)));
      expect(retries.map(textOf)).toEqual(Array.from({ length: 10 }, () => PAYMENT_IN_PROGRESS_REASON));
    }
    expect(governed.rail.calls).toHaveLength(1);
  });
});
