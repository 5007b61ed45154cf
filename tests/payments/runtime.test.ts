import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { HouseholdEvent } from '../../lib/events';
import { textOf } from '../proxy/helpers';
import { startTestHousehold, type TestHousehold } from './household';

// The composition root (SPEC §2, §8): starting twice on one data folder changes nothing, and the
// merchant is pinned by operator code at the first start; a shop that later presents another key
// is refused, with a clear message, and its invoices cannot be put to the household.
const folders: string[] = [];
let household: TestHousehold | undefined;
afterEach(async () => {
  await household?.close();
  household = undefined;
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

async function startOn(dataDir: string, options: { enrol?: boolean } = {}) {
  const events: HouseholdEvent[] = [];
  const started = await startTestHousehold({ dataDir, ...options, onEvent: (event) => events.push(event) });
  return { started, events };
}

describe('the household runtime', () => {
  it('a second start on the same data folder changes no key, DID, membership, merchant or passkey, and issues no code', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'household-runtime-'));
    folders.push(dataDir);
    const first = await startTestHousehold({ dataDir });
    const before = {
      household: first.runtime.identity.household.adminDocument,
      members: first.runtime.identity.household.members,
      memberships: first.runtime.identity.household.memberships,
      settlement: first.runtime.identity.household.settlementDid,
      merchant: first.runtime.merchant,
      merchants: await first.runtime.identity.store.identity.merchants.list(),
    };
    expect(first.runtime.identity.codes.map((code) => code.role)).toEqual(['child', 'parent']);
    await first.close();

    const { started, events } = await startOn(dataDir, { enrol: false });
    household = started;
    const { runtime } = started;
    expect(events.map((event) => event.kind)).not.toContain('merchant-pinned');
    expect(events.map((event) => event.kind)).not.toContain('enrollment-code-issued');
    expect(runtime.identity.codes).toEqual([]);
    expect({
      household: runtime.identity.household.adminDocument,
      members: runtime.identity.household.members,
      memberships: runtime.identity.household.memberships,
      settlement: runtime.identity.household.settlementDid,
      merchant: runtime.merchant,
      merchants: await runtime.identity.store.identity.merchants.list(),
    }).toEqual(before);
  });

  it('refuses a shop that presents another key than the one pinned, and its invoices', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'household-runtime-'));
    folders.push(dataDir);
    const first = await startTestHousehold({ dataDir, enrol: false });
    const pinned = first.runtime.merchant?.did;
    expect(pinned).toMatch(/^did:key:/);
    await first.close();
    // The shop loses its key and makes a new one: to the household, another merchant.
    await rm(join(dataDir, 'shop', 'merchant-key.json'));

    const { started, events } = await startOn(dataDir, { enrol: false });
    household = started;
    expect(started.runtime.merchant).toBeUndefined();
    expect(events.find((event) => event.kind === 'merchant-key-refused')?.message).toMatch(
      new RegExp(`${pinned} is pinned; its invoices are refused until the operator trusts the new key`),
    );
    const { invoice } = (await started.invoice([{ sku: 'cheese-slice', qty: 1 }])) as { invoice: string };
    const { result } = await started.call('request_approval', { invoice }, 'request approval');
    expect(textOf(result)).toMatch(/not from a merchant the household trusts/);
    expect(await started.runtime.identity.store.identity.merchants.list()).toEqual([
      expect.objectContaining({ did: pinned }),
    ]);
  });
});
