/** The pin tables' rows and what both pin stores (SQLite, PostgreSQL) make of them. */
import { safeJsonParse } from '../policy/safe-json';
import type { DefinitionChange, HeldDefinition, HoldReason, PinSource, PinStatus, ToolPin } from './types';

/** A `tool_pins` row, as both stores read it (times as numbers). */
export interface PinRow {
  server: string;
  tool: string;
  hash: string;
  definition: string | null;
  source: string;
  pinned_at: number;
}

/** A `tool_pins_held` row, as both stores read it (times as numbers). */
export interface HeldRow {
  server: string;
  tool: string;
  reason: string;
  hash: string;
  definition: string;
  diff: string;
  seen_at: number;
}

/** A pin from its row. */
export function toPin(row: PinRow): ToolPin {
  return {
    server: row.server,
    tool: row.tool,
    hash: row.hash,
    ...(row.definition !== null && { definition: row.definition }),
    source: row.source as PinSource,
    pinnedAt: row.pinned_at,
  };
}

/** A held definition from its row; a diff that does not parse reads as no differences. */
export function toHeld(row: HeldRow): HeldDefinition {
  const parsed = safeJsonParse(row.diff);
  return {
    server: row.server,
    tool: row.tool,
    reason: row.reason as HoldReason,
    hash: row.hash,
    definition: row.definition,
    diff: parsed.ok && Array.isArray(parsed.value) ? (parsed.value as DefinitionChange[]) : [],
    seenAt: row.seen_at,
  };
}

const heldStates = { changed: 'pending-changed', new: 'pending-new', rejected: 'rejected' } as const;

/** Every tool's state from its pin and its held definition (both ordered by server, tool). */
export function statusOf(pins: readonly PinRow[], held: readonly HeldRow[]): PinStatus[] {
  const byKey = new Map<string, { server: string; tool: string; pinned?: string; held?: HeldRow }>();
  const key = (server: string, tool: string) => `${server}\u0000${tool}`;
  for (const row of pins)
    byKey.set(key(row.server, row.tool), { server: row.server, tool: row.tool, pinned: row.hash });
  for (const row of held) {
    const found = byKey.get(key(row.server, row.tool)) ?? { server: row.server, tool: row.tool };
    byKey.set(key(row.server, row.tool), { ...found, held: row });
  }
  return [...byKey.values()]
    .sort((left, right) => compare(left.server, right.server) || compare(left.tool, right.tool))
    .map((entry) => ({
      server: entry.server,
      tool: entry.tool,
      state: entry.held === undefined ? 'pinned' : heldStates[entry.held.reason as HoldReason],
      ...(entry.pinned !== undefined && { pinned: entry.pinned }),
      ...(entry.held !== undefined && { held: entry.held.hash }),
    }));
}

function compare(left: string, right: string): number {
  return left < right ? -1 : left > right ? 1 : 0;
}
