import { describe, expect, it } from 'vitest';
import { createDecisionWakes } from './decision-wakes';

/** Longer than any test: a sleep that ends here was ended by a wake, never by its timer. */
const forever = 24 * 60 * 60 * 1000;

describe('decision wakes', () => {
  it("ends a wait's sleep at a local decision on its request, and not at another request's", async () => {
    const wakes = createDecisionWakes();
    const first = wakes.open('a');
    const other = wakes.open('b');
    const slept = first.sleep(forever, first.count);
    let otherWoke = false;
    const otherSlept = other.sleep(forever, other.count).then(() => {
      otherWoke = true;
    });
    wakes.notify('a');
    await slept;
    expect(first.count).toBe(1);
    expect(otherWoke).toBe(false);
    expect(other.count).toBe(0);
    wakes.notify('b');
    await otherSlept;
    other.close();
    first.close();
  });

  it('does not sleep through a wake that came while the store was being read', async () => {
    const wakes = createDecisionWakes();
    const wake = wakes.open('a');
    const since = wake.count;
    // The decision lands between the read and the sleep.
    wakes.notify('a');
    await wake.sleep(forever, since);
    expect(wake.count).toBe(1);
    wake.close();
  });

  it("is woken by the store's watch and by an abort, and stops watching at close", async () => {
    const watched = new Map<string, () => void>();
    const stopped: string[] = [];
    const wakes = createDecisionWakes((id, poke) => {
      watched.set(id, poke);
      return () => stopped.push(id);
    });
    // A wait decided at its first read never sleeps, and listens to nothing.
    wakes.open('decided').close();
    expect([...watched.keys()]).toEqual([]);
    const controller = new AbortController();
    const wake = wakes.open('a', controller.signal);
    const byStore = wake.sleep(forever, wake.count);
    watched.get('a')?.();
    await byStore;
    const byAbort = wake.sleep(forever, wake.count);
    controller.abort();
    await byAbort;
    // Aborted: it never sleeps again.
    await wake.sleep(forever, wake.count);
    expect(wake.count).toBe(2);
    expect(stopped).toEqual([]);
    wake.close();
    expect(stopped).toEqual(['a']);
    // Closed: a later decision reaches nobody.
    wakes.notify('a');
    expect(wake.count).toBe(2);
  });
});
