import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FIXTURE_NOW, FIXTURE_PAYEE, spendCredential } from '../../policies/spend-limit/fixtures/spend-limit-fixtures';
import { type EvidenceStore, openSqliteEvidenceStore } from '../../proxy/index';
import { governedBank, requester } from '../policy/governed-bank';
import { callTool, textOf } from '../proxy/helpers';

// Issue 11 item 17: signed evidence whose `exp` lies absurdly far ahead (1e16 seconds) reached
// the evidence store, overflowed it, and was refused as "evidence store is unavailable". It must
// be refused for what it is, an implausible lifetime, before the store is touched at all.
const _NOW_MS = FIXTURE_NOW * 1000;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The real SQLite store, with every reserve the filter makes counted. */
async function countingStore() {
  const folder = mkdtempSync(join(tmpdir(), 'emcp-evidence-'));
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }));
  const store = await openSqliteEvidenceStore({ path: join(folder, 'evidence.sqlite'), capacity: 1_000 });
  const reserves: unknown[] = [];
  const counting: EvidenceStore = {
    ...store,
    reserve: (ids, now, options) => {
      reserves.push(ids);
      return store.reserve(ids, now, options);
    },
  };
  return { store: counting, reserves };
}

describe.each(['rego', 'cel'] as const)('evidence with an implausible lifetime (%s)', (engine) => {
  async function setup() {
    const errors: unknown[] = [];
    const { store, reserves } = await countingStore();
    const bank = await governedBank({ engine, store, onError: (error) => errors.push(error) });
    cleanups.push(() => bank.close());
    return { client: bank.client, received: bank.received, reserves, errors };
  }

  it.each([
    ['1e16 seconds', 1e16],
    ['a year ahead', FIXTURE_NOW + 366 * 24 * 3600],
    ['past the largest safe millisecond', Number.MAX_SAFE_INTEGER],
  ])('refuses exp %s as an implausible lifetime without touching the store', async (_label, exp) => {
    const { client, received, reserves, errors } = await setup();
    const credential = spendCredential({
      issuer: requester,
      type: 'SpendRequest',
      amountCents: 500,
      jti: `urn:uuid:${engine}-long-lived`,
      exp,
    });
    const result = await callTool(client, 'bank__pay', {
      amountCents: 500,
      payee: FIXTURE_PAYEE,
      requesterCredential: credential,
    });
    expect(result.isError).toBe(true);
    const text = textOf(result);
    expect(text).toMatch(/`requesterCredential`.*lifetime/);
    expect(text).not.toMatch(/unavailable/);
    expect(text).not.toContain(credential);
    expect(reserves).toEqual([]);
    expect(errors).toEqual([]);
    expect(received).toEqual([]);
  });

  it('still accepts evidence with an ordinary lifetime', async () => {
    const { client, received, reserves } = await setup();
    const credential = spendCredential({
      issuer: requester,
      type: 'SpendRequest',
      amountCents: 500,
      jti: `urn:uuid:${engine}-ordinary`,
    });
    const result = await callTool(client, 'bank__pay', {
      amountCents: 500,
      payee: FIXTURE_PAYEE,
      requesterCredential: credential,
    });
    expect(textOf(result)).toBe('paid');
    expect(reserves).toHaveLength(1);
    expect(received).toHaveLength(1);
  });
});
