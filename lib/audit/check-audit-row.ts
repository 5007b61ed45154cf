import { z } from 'zod';
import { HouseholdEvent } from '../events';
import { canonicalJson, hashAuditRow } from './hash-audit-row';
import { parseJson } from './parse-json';

/** A stored row of the audit table as read back, before anything about it is trusted. */
export interface StoredAuditRow {
  readonly id: number;
  readonly event: string;
  readonly prevHash: string;
  readonly hash: string;
}

/** The verdict on one row: its hash and event when it continues the chain, or why not, naming the row. */
export type AuditRowVerdict =
  | { readonly ok: true; readonly hash: string; readonly event: HouseholdEvent }
  | { readonly ok: false; readonly rowId: number; readonly reason: string };

const Row = z.object({ id: z.number().int(), event: z.string(), prevHash: z.string(), hash: z.string() });

/**
 * Checks that `raw` is the chain's next row after a row whose hash is `previousHash` (SPEC §8): its id
 * is `expectedId` (a gap is a deleted row), its bytes are a household event in canonical form, it
 * names the previous row's hash, and its own bytes hash to what it records (an edited row). The one
 * row check of both the verifier and the checkpointer, so neither signs nor passes what the other refuses.
 */
export function checkAuditRow(
  raw: unknown,
  expected: { readonly id: number; readonly previousHash: string },
): AuditRowVerdict {
  const { id: expectedId, previousHash } = expected;
  const row = Row.safeParse(raw);
  if (!row.success) return broken(expectedId, `row ${expectedId} is not an audit row (its columns were altered)`);
  const { id, event: text, prevHash, hash } = row.data;
  // 1. Ids run 1, 2, 3, … without a gap: a gap is a deleted row.
  if (id !== expectedId) {
    return broken(
      expectedId,
      id > expectedId
        ? `row ${expectedId} is missing: the next row is ${id} (rows were deleted)`
        : `row ${id} appears where row ${expectedId} should be (ids were altered)`,
    );
  }
  // 2. The stored bytes are a household event in canonical form.
  const value = parseJson(text);
  if (value === undefined) return broken(id, `row ${id}'s event is not JSON (it was edited)`);
  const event = HouseholdEvent.safeParse(value);
  if (!event.success) return broken(id, `row ${id}'s event is not a household event (it was edited)`);
  if (canonicalJson(value) !== text) return broken(id, `row ${id}'s event is not in canonical form (it was edited)`);
  // 3. The link: this row names the previous row's hash.
  if (prevHash !== previousHash) {
    return broken(
      id,
      id === 1
        ? 'row 1 does not start the chain: its prev_hash is not the genesis value'
        : `row ${id} does not follow row ${id - 1}: its prev_hash is not row ${id - 1}'s hash (rows were reordered, removed or rewritten)`,
    );
  }
  // 4. The row's own bytes hash to what it records.
  if (hashAuditRow({ id, prevHash, event: value }) !== hash) {
    return broken(id, `row ${id}'s contents do not match its hash (the row was edited)`);
  }
  return { ok: true, hash, event: event.data };
}

function broken(rowId: number, reason: string): { ok: false; rowId: number; reason: string } {
  return { ok: false, rowId, reason };
}
