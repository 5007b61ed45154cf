import { z } from 'zod';
import { HouseholdEvent } from '../events';
import type { AuditEntry } from './audit-log';
import type { StoredAuditRow } from './check-audit-row';
import { parseJson } from './parse-json';

/** Entries {@link AuditLog.after} returns when no limit is given. */
export const defaultAuditLimit = 500;
/** The most entries one read returns. */
export const maxAuditLimit = 10_000;

/** `after`'s arguments at the boundary: an id, a bounded limit, and exact filter values. */
export const AuditQuerySchema = z.strictObject({
  id: z.number().int().min(0),
  limit: z.number().int().min(1).max(maxAuditLimit).default(defaultAuditLimit),
  filter: z
    .strictObject({
      session: z.string().max(200).optional(),
      orderId: z.string().max(200).optional(),
      kind: z.string().max(200).optional(),
      outcome: HouseholdEvent.shape.outcome.optional(),
    })
    .default({}),
});

/** The filter fields and the generated column each one matches (constants: never user text). */
export const auditFilterColumns = {
  session: 'session',
  orderId: 'order_id',
  kind: 'kind',
  outcome: 'outcome',
} as const;

const Stored = z.object({ id: z.number().int(), event: z.string(), prevHash: z.string(), hash: z.string() });

/** A stored row as an entry, or `undefined` when its bytes are not a household event (edited at rest). */
export function toAuditEntry(row: StoredAuditRow): AuditEntry | undefined {
  const parsedRow = Stored.safeParse(row);
  if (!parsedRow.success) return undefined;
  const event = HouseholdEvent.safeParse(parseJson(parsedRow.data.event));
  if (!event.success) return undefined;
  return { id: parsedRow.data.id, prevHash: parsedRow.data.prevHash, hash: parsedRow.data.hash, event: event.data };
}

/**
 * Lone UTF-16 surrogates, which JSON canonicalisation (RFC 8785) cannot encode, and U+0000, which
 * PostgreSQL's JSON functions refuse (the filter columns are generated from the event's text).
 */
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * The event as it is appended: the schema again at the boundary, then strings made well-formed so
 * canonicalisation and neither database can refuse it (a lone surrogate or a NUL in a tool name
 * must not keep a decision out of the log). Throws on an event that fails the schema.
 */
export function appendableEvent(event: HouseholdEvent): HouseholdEvent {
  return HouseholdEvent.parse(wellFormed(HouseholdEvent.parse(event)));
}

/** The value with every lone surrogate and NUL in its strings replaced by U+FFFD. */
function wellFormed(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(loneSurrogate, '\uFFFD').replaceAll('\u0000', '\uFFFD');
  if (Array.isArray(value)) return value.map(wellFormed);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [String(wellFormed(key)), wellFormed(item)]));
  }
  return value;
}
